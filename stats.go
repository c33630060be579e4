package ratewise

import (
	"context"
	"sync/atomic"
	"time"
)

// CallStats counts what the transport did for the calls made with one
// context: attempts sent, responses read as rate-limited, time spent
// waiting, and the last status received. Get one from [WithCallStats].
// It is safe for concurrent use; its zero value counts nothing yet.
//
// Every call made with the context adds to it, so a redirect followed by
// [http.Client] adds its own attempts. Give each call its own CallStats
// when they must be told apart.
type CallStats struct {
	attempts      atomic.Int64
	rateLimitHits atomic.Int64
	waited        atomic.Int64 // nanoseconds
	lastStatus    atomic.Int64
}

// Attempts returns the number of requests sent to the base RoundTripper.
func (s *CallStats) Attempts() int { return int(s.attempts.Load()) }

// RateLimitHits returns the number of responses read as rate-limited.
func (s *CallStats) RateLimitHits() int { return int(s.rateLimitHits.Load()) }

// Waited returns the time spent waiting before retries, summed.
func (s *CallStats) Waited() time.Duration { return time.Duration(s.waited.Load()) }

// LastStatus returns the status code of the last response received, or 0
// when none was.
func (s *CallStats) LastStatus() int { return int(s.lastStatus.Load()) }

// The recorders below accept a nil receiver: most calls carry no stats.

func (s *CallStats) recordAttempt() {
	if s != nil {
		s.attempts.Add(1)
	}
}

func (s *CallStats) recordResponse(status int, class Class) {
	if s == nil {
		return
	}
	s.lastStatus.Store(int64(status))
	if class.refusal() {
		s.rateLimitHits.Add(1)
	}
}

func (s *CallStats) recordWait(d time.Duration) {
	if s != nil {
		s.waited.Add(int64(d))
	}
}

// WithCallStats returns a context that makes the transport count, in the
// returned *CallStats, what it does for every call made with that context.
func WithCallStats(ctx context.Context) (context.Context, *CallStats) {
	// The stats and the options that carry them, in one allocation.
	both := new(struct {
		o callOptions
		s CallStats
	})
	return withOptionsIn(ctx, &both.o, func(o *callOptions) { o.stats = &both.s }), &both.s
}

// callStatsFrom returns the context's CallStats, or nil.
func callStatsFrom(ctx context.Context) *CallStats {
	if o := optionsFrom(ctx); o != nil {
		return o.stats
	}
	return nil
}

// WithBudget returns a context whose calls share one wait budget of d: the
// time during which at least one call made with it waits is at most d.
// Waits that overlap are paid for once: two calls waiting out the same 30
// seconds spend 30 seconds. A wait that does not fit in what is left is not
// started; the call ends at once with its last response, as it does when a
// call's own [RetryPolicy.TotalWaitCap] runs out, which the shared budget
// replaces. A wait cut short by cancellation gives back what it alone
// covered. A wait for a concurrency slot, whose length is unknown when it
// starts, is bounded by what is left then and paid for when it ends, so
// that calls queued for slots together may overspend a little. A negative
// d is read as 0: no waiting at all. An inner WithBudget replaces an outer
// one for the calls made with it.
func WithBudget(ctx context.Context, d time.Duration) context.Context {
	b := newBudget(d)
	return withOptions(ctx, func(o *callOptions) { o.budget = b })
}

// BudgetLeft returns the wait budget left in ctx's shared budget, and false
// when ctx carries none.
func BudgetLeft(ctx context.Context) (time.Duration, bool) {
	b := budgetFrom(ctx)
	if b == nil {
		return 0, false
	}
	return b.remaining(), true
}

func budgetFrom(ctx context.Context) *budget {
	if o := optionsFrom(ctx); o != nil {
		return o.budget
	}
	return nil
}
