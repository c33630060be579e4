package ratewise

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/internal/scopes"
	"golang.org/x/time/rate"
)

// This file is a Limit at work: the engine's scope (internal/scopes),
// the Limit it was made from, and what picks a request's key; and
// Acquire, which takes a scope's turns for work that is not HTTP.

// scope is a Limit at work. The engine keeps its per-key state; the
// scope adds the Limit in force (SetLimit replaces it) and the functions
// that read a request: its key, and whether the scope applies.
type scope struct {
	*scopes.Scope
	key     KeyFunc
	applies func(*http.Request) bool // nil: every request
	lim     atomic.Pointer[Limit]
}

// newScope returns the scope of l, defaults filled in, sharing with the
// transport's other scopes what shared holds.
func newScope(l Limit, shared *scopes.Shared) *scope {
	l = l.withDefaults()
	s := &scope{key: l.Key, applies: l.Applies}
	s.lim.Store(&l)
	s.Scope = scopes.New(l.Name, l.Adaptive, sameKeyFunc(l.Key, Global), idleTimeout(l.IdleTimeout), scopeConfig(&l), shared)
	return s
}

// limit is the Limit in force, defaults filled in.
func (s *scope) limit() *Limit { return s.lim.Load() }

// setLimit puts l, defaults filled in, in force.
func (s *scope) setLimit(l Limit) {
	s.lim.Store(&l)
	s.Set(scopeConfig(&l))
}

// appliesTo reports whether the scope limits req.
func (s *scope) appliesTo(req *http.Request) bool { return s.applies == nil || s.applies(req) }

// scopeConfig is l as the scope engine takes it.
func scopeConfig(l *Limit) scopes.Config {
	return scopes.Config{Config: limit.Config{Rate: l.Rate, Burst: l.Burst, Window: l.Window, MinSpacing: l.MinSpacing,
		SpacingJitter: l.SpacingJitter, Learned: l.Adaptive, MaxConcurrent: l.MaxConcurrent,
		FailFast: l.FailFast, MaxQueue: l.MaxQueue, Reserve: l.Reserve},
		MaxWait: l.MaxWait, StartRate: float64(l.StartRate), Store: l.Store}
}

// finiteRate reports whether r is a rate to pace by.
func finiteRate(r rate.Limit) bool { return limit.FiniteRate(r) }

// limitError is err, a scope's *scopes.Refusal, as the *ClientLimitError
// a caller reads; any other error as it is.
func limitError(err error) error {
	if r, ok := err.(*scopes.Refusal); ok {
		return &ClientLimitError{Scope: r.Scope, Key: r.Key, Reason: LimitReason(r.Reason), RetryIn: r.RetryIn, Err: r.Err}
	}
	return err
}

// Acquire takes n turns of the limit scope named scopeName for key, for
// work that does not go through the transport (a gRPC call, a library
// that hides its HTTP client), so that it spends the same budget as the
// requests. With maxWait 0 it does not wait: it returns a
// *ClientLimitError (Reason "fail-fast", and RetryIn) when the turns are
// not there now; otherwise it waits up to maxWait, the Limit's MaxWait and
// ctx's deadline, or returns "max-wait" at once, having taken nothing.
// See "Turns for work that is not HTTP" in the package doc for keys,
// stores, priorities and what it does not take.
func (t *Transport) Acquire(ctx context.Context, scopeName, key string, n int, maxWait time.Duration) error {
	if t.err != nil {
		return t.err
	}
	s := t.scopeNamed(scopeName)
	switch {
	case s == nil:
		all := t.scopes()
		names := make([]string, len(all))
		for i, s := range all {
			names[i] = fmt.Sprintf("%q", s.Name())
		}
		return fmt.Errorf("ratewise: Acquire: no limit scope is named %q; the transport's scopes are %s",
			scopeName, strings.Join(names, ", "))
	case s.Adaptive():
		return fmt.Errorf("ratewise: Acquire: limit scope %q is Adaptive: it learns its pace from the responses of the requests it paces and has no turns to take; name a scope with a Rate, a MinSpacing or a Window", scopeName)
	case n < 1:
		return fmt.Errorf("ratewise: Acquire: n (%d) must be at least 1", n)
	}
	l := s.limit()
	if !l.paces() {
		return nil // nothing to take
	}
	if (finiteRate(l.Rate) || l.Window > 0) && n > l.Burst {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over limit scope %q's Burst (%d): that many turns never come at once; take at most Burst at a time", n, scopeName, l.Burst)
	}
	o := optionsFrom(ctx)
	if o != nil && o.priority < PriorityNormal && l.Reserve > 0 && n > l.Burst-l.Reserve {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over what a PriorityLow caller may take of limit scope %q at once (Burst %d less Reserve %d); take fewer at a time", n, scopeName, l.Burst, l.Reserve)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.Global() {
		key = ""
	}
	var c call // the waits are a call's with no request
	c.initAcquire(t, ctx, key, maxWait, o)
	cfg := scopeConfig(l)
	if maxWait <= 0 {
		cfg.FailFast = true
	}
	r := c.scopeRequest()
	err := s.Scope.Acquire(&r, key, n, &cfg)
	if err != nil && ctx.Err() == nil {
		// A wait that outgrew the deadline between the check and the
		// wait (the clock moved) is a wait too long, as the check says.
		var late pastDeadlineError
		if errors.As(err, &late) {
			return &ClientLimitError{Scope: s.Name(), Key: key, Reason: LimitMaxWait, RetryIn: late.wait}
		}
	}
	return limitError(err)
}

// scopeNamed returns the scope named name, or nil.
func (t *Transport) scopeNamed(name string) *scope {
	for _, s := range t.scopes() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// scopes returns the limit scopes, in the order given. The slice is never
// changed: AddLimit replaces it.
func (t *Transport) scopes() []*scope { return *t.scopeList.Load() }
