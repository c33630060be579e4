package ratewise

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Acquire takes n turns of the limit scope named scope for key, for work
// that does not go through the transport (a gRPC call, a library that
// hides its HTTP client), so that it spends the same budget as the
// transport's requests. scope is a Limit's Name as given to [WithLimit]
// ("limit N" for the Nth given without one); key is what the scope's
// KeyFunc would return for a request (a host, by default), and a scope
// keyed by [Global] ignores it.
//
// A turn is what a request takes of the scope: a token of its bucket
// (Rate), a start in its Window, or a gap of its MinSpacing; n turns of a
// spacing are n gaps, the first of which starts when Acquire returns. A
// scope with a Store takes its tokens from the store's bucket, under the
// key the transport's requests use, so that every transport given the
// store shares them; when the store fails, the scope's own bucket stands
// in, unless the store fails closed: then Acquire returns a *LimitError
// with Reason "store-unavailable" wrapping the store's error. n must be
// at least 1 and, for a bucket or a window, at most Burst, or it could
// never be had. A scope that paces nothing (only MaxConcurrent, or Rate
// rate.Inf) has nothing to take: Acquire returns nil at once. An Adaptive
// scope, such as the [LearnedScope] New adds by default, learns its pace
// from the responses of the requests it paces and has no turns to give:
// Acquire returns an error.
//
// With maxWait 0 (or less) Acquire does not wait: it returns nil when the
// n turns are there now, else a *LimitError with Reason "fail-fast" and
// RetryIn when they would be. Otherwise it waits for them, up to maxWait,
// the Limit's own MaxWait and the context's deadline: when they would
// come later, it returns a *LimitError with Reason "max-wait" and RetryIn
// at once, having taken nothing. The Limit's FailFast and MaxQueue apply
// as they do to requests; MaxQueue counts Acquire's waiters among the
// requests'. A wait ends at once when ctx ends, with ctx's error, and the
// turns it held in the scope's own bucket, spacing or window go back to
// them (tokens the store reserved are spent, as a request's are).
//
// Acquire takes no concurrency slot (MaxConcurrent), which a request
// holds until its response body is closed, and does not wait for a
// pause (see [Transport.Blocking]). ctx's [WithPriority] applies
// to a Limit's Reserve as it does to requests: a PriorityLow caller takes
// at most Burst less Reserve at once. Its waits count in [Transport.Stats]
// and in ctx's [CallStats] as pacing waits, and are traced (WaitStarted,
// WaitEnded) with key as their Key. A transport given an invalid option
// returns that option's error, as RoundTrip does.
func (t *Transport) Acquire(ctx context.Context, scope, key string, n int, maxWait time.Duration) error {
	if t.err != nil {
		return t.err
	}
	s := t.scopeNamed(scope)
	switch {
	case s == nil:
		scopes := t.scopes()
		names := make([]string, len(scopes))
		for i, s := range scopes {
			names[i] = fmt.Sprintf("%q", s.name)
		}
		return fmt.Errorf("ratewise: Acquire: no limit scope is named %q; the transport's scopes are %s",
			scope, strings.Join(names, ", "))
	case s.adaptive:
		return fmt.Errorf("ratewise: Acquire: limit scope %q is Adaptive: it learns its pace from the responses of the requests it paces and has no turns to take; name a scope with a Rate, a MinSpacing or a Window", scope)
	case n < 1:
		return fmt.Errorf("ratewise: Acquire: n (%d) must be at least 1", n)
	}
	l := s.limit()
	if !l.paces() {
		return nil // nothing to take
	}
	if (finiteRate(l.Rate) || l.Window > 0) && n > l.Burst {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over limit scope %q's Burst (%d): that many turns never come at once; take at most Burst at a time", n, scope, l.Burst)
	}
	o := optionsFrom(ctx)
	if o != nil && o.priority < PriorityNormal && l.Reserve > 0 && n > l.Burst-l.Reserve {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over what a PriorityLow caller may take of limit scope %q at once (Burst %d less Reserve %d); take fewer at a time", n, scope, l.Burst, l.Reserve)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.global {
		key = ""
	}
	e := s.states.Acquire(key, true)
	defer s.states.Release(e)
	st := &e.State
	s.caughtUp(st)

	// A call with no request: maxWait is its whole budget, so that every
	// wait it may start is one that fits, and mayWait refuses the others
	// as a request's MaxWait does.
	c := call{t: t, ctx: ctx, acquireKey: key, waitLeft: max(maxWait, 0)}
	if o != nil {
		c.priority, c.stats, c.trace, c.endpoint = o.priority, o.stats, o.trace, o.endpoint
	}
	limit := *l
	if maxWait <= 0 {
		limit.FailFast = true
	}
	now := time.Now()
	wait := c.waitLeft
	if l.MaxWait > 0 {
		wait = min(wait, l.MaxWait)
	}
	if end, ok := ctx.Deadline(); ok {
		wait = min(wait, end.Sub(now)-time.Nanosecond) // a wait must end before the deadline
	}
	cfg := engineLimit(&limit)
	err := s.pace(&c, key, st, now.Add(max(wait, 0)), &limit, &cfg, n)
	if err != nil && ctx.Err() == nil {
		// A wait that outgrew the deadline between the check and the
		// wait (the clock moved) is a wait too long, as the check says.
		var late pastDeadlineError
		if errors.As(err, &late) {
			return &LimitError{Scope: s.name, Key: key, Reason: "max-wait", RetryIn: late.wait}
		}
	}
	return err
}

// scopeNamed returns the scope named name, or nil.
func (t *Transport) scopeNamed(name string) *scope {
	for _, s := range t.scopes() {
		if s.name == name {
			return s
		}
	}
	return nil
}
