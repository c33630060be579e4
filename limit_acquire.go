package ratewise

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Acquire takes n turns of the limit scope named scope for key, for work
// that does not go through the transport (a gRPC call, a library that hides
// its HTTP client), so that it spends the same budget as the requests. With
// maxWait 0 it does not wait: it returns a *ClientLimitError (Reason "fail-fast",
// and RetryIn) when the turns are not there now; otherwise it waits up to
// maxWait, the Limit's MaxWait and ctx's deadline, or returns "max-wait"
// at once, having taken nothing. See "Turns for work that is not HTTP" in
// the package doc for keys, stores, priorities and what it does not take.
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
	c := call{t: t, acquireKey: key, waitBudget: waitBudget{ctx: ctx, own: max(maxWait, 0)}}
	if o != nil {
		c.priority, c.stats, c.trace, c.endpoint = o.priority, o.stats, o.trace, o.endpoint
	}
	limit := *l
	if maxWait <= 0 {
		limit.FailFast = true
	}
	now := time.Now()
	wait := c.own
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
			return &ClientLimitError{Scope: s.name, Key: key, Reason: LimitMaxWait, RetryIn: late.wait}
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
