package ratewise

import (
	"context"
	"time"
)

// This file holds every function that gives a request's context
// something for the transport: its stats, a wait budget shared by calls,
// a priority, a retry policy, a trace and an endpoint label.

// callOptions is what a request's context carries for the transport: its
// stats, wait budget, priority, retry policy, trace and endpoint label. They travel in one context
// value so that RoundTrip finds them all with a single lookup.
type callOptions struct {
	stats    *CallStats
	budget   *sharedBudget
	priority Priority
	retry    *RetryPolicy // with defaults filled in; nil means the transport's
	retryErr error        // why the policy given to WithRetryPolicy is invalid
	trace    *Trace
	endpoint string
}

type callOptionsKey struct{}

// optionsFrom returns the options ctx carries, or nil.
func optionsFrom(ctx context.Context) *callOptions {
	o, _ := ctx.Value(callOptionsKey{}).(*callOptions)
	return o
}

// withOptions returns a context carrying a copy of ctx's options changed
// by set; ctx's own are left as they are.
func withOptions(ctx context.Context, set func(*callOptions)) context.Context {
	return withOptionsIn(ctx, new(callOptions), set)
}

// withOptionsIn is withOptions with o, which the caller allocated, as the
// copy.
func withOptionsIn(ctx context.Context, o *callOptions, set func(*callOptions)) context.Context {
	if parent := optionsFrom(ctx); parent != nil {
		*o = *parent
	}
	set(o)
	return context.WithValue(ctx, callOptionsKey{}, o)
}

// Priority ranks a request against others of the same key when a limit is
// tight: see [Limit.Reserve] and [Limit.MaxConcurrent]. The zero value is
// PriorityNormal.
type Priority int8

const (
	// PriorityLow requests must leave a Limit's Reserve tokens unspent and
	// queue behind the others for a concurrency slot: background work.
	PriorityLow Priority = -1
	// PriorityNormal is the default.
	PriorityNormal Priority = 0
	// PriorityHigh requests go first in the queue for a concurrency slot:
	// a user waiting on the answer.
	PriorityHigh Priority = 1
)

// String returns "low", "normal" or "high".
func (p Priority) String() string {
	switch {
	case p < PriorityNormal:
		return "low"
	case p > PriorityNormal:
		return "high"
	}
	return "normal"
}

// WithPriority returns a context whose requests have priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.priority = p })
}

// WithRetryPolicy returns a context whose requests retry by p instead of
// the transport's policy: a user-facing call may retry twice where a
// background job retries five times. Zero fields of p take their defaults,
// not the transport's values. An invalid p makes every request made with
// the context fail with p's validation error.
func WithRetryPolicy(ctx context.Context, p RetryPolicy) context.Context {
	prepared, err := p.prepared()
	return withOptions(ctx, func(o *callOptions) { o.retry, o.retryErr = prepared, err })
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
// time during which at least one call made with it waits is at most d, and
// waits that overlap are paid for once. A wait that does not fit what is
// left is not started; the call ends at once with its last response. It
// replaces each call's [RetryPolicy.TotalWaitCap]; an inner WithBudget
// replaces an outer one, and a negative d is 0. See "Wait budgets" in the
// package doc.
func WithBudget(ctx context.Context, d time.Duration) context.Context {
	b := newSharedBudget(d)
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

func budgetFrom(ctx context.Context) *sharedBudget {
	if o := optionsFrom(ctx); o != nil {
		return o.budget
	}
	return nil
}

// WithCallTrace returns a context whose calls report to t. A trace already
// in ctx keeps being called, before t; neither is modified.
func WithCallTrace(ctx context.Context, t *Trace) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.trace = composeTraces(o.trace, t) })
}

// WithoutCallTrace returns ctx without the traces given to it with
// [WithCallTrace]: its calls report to none of them (the transport's
// own, from [WithTrace], still hear them). Use it where a call's base
// transport makes calls of its own with the attempt's context, a nested
// client, so that the outer call's hooks do not hear the inner calls as
// its own.
func WithoutCallTrace(ctx context.Context) context.Context {
	if o := optionsFrom(ctx); o == nil || o.trace == nil {
		return ctx
	}
	return withOptions(ctx, func(o *callOptions) { o.trace = nil })
}

// WithEndpoint returns a context whose calls carry the label name, such as
// "card" or "comments", in their trace events.
func WithEndpoint(ctx context.Context, name string) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.endpoint = name })
}
