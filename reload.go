package ratewise

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/ratewise/ratewise/store"
)

// This file changes a running transport's policies (retry, limits,
// breaker), so that a service can turn itself down without a deploy. A change applies from the next
// attempt; calls in flight are not dropped.

// SetRetryPolicy makes p the transport's retry policy, from the next
// attempt of every call, those in flight included; zero fields take their
// defaults. A call keeps the wait budget it started with, and a policy
// given to a call's context (WithRetryPolicy) still wins. An invalid p is
// refused with its validation error and changes nothing.
func (t *Transport) SetRetryPolicy(p RetryPolicy) error {
	prepared, err := p.prepared()
	if err != nil {
		return err
	}
	t.retry.Store(prepared)
	return nil
}

// RetryPolicy returns the transport's retry policy, defaults filled in.
func (t *Transport) RetryPolicy() RetryPolicy {
	p := *t.retry.Load()
	p.RateLimitPhrases = slices.Clone(p.RateLimitPhrases)
	return p
}

// SetLimit replaces the Limit of the scope named l.Name from the next
// admission of every request. The scope keeps its Key and Applies, whatever
// l says; Adaptive and IdleTimeout may not change, and a SetLimit that tries
// is refused. Each key's bucket keeps its tokens under the new rate and
// burst, and slots follow a new MaxConcurrent. An l that keeps a bucket and
// names no Store takes WithStore's. An invalid l, or one naming no scope, is
// refused and changes nothing.
func (t *Transport) SetLimit(l Limit) error {
	if err := l.Validate(); err != nil {
		return err
	}
	t.reloadMu.Lock() // one SetLimit at a time
	defer t.reloadMu.Unlock()
	s := t.scopeNamed(l.Name)
	if s == nil {
		return fmt.Errorf("ratewise: no limit scope is named %q", l.Name)
	}
	l = t.withStore(l)
	old := s.limit()
	l = l.withDefaults()
	l.Key, l.Applies = old.Key, old.Applies
	var errs []error
	if l.Adaptive != old.Adaptive {
		errs = append(errs, fmt.Errorf("its Adaptive (%v to %v)", old.Adaptive, l.Adaptive))
	}
	if l.IdleTimeout != old.IdleTimeout {
		errs = append(errs, fmt.Errorf("its IdleTimeout (%v to %v)", old.IdleTimeout, l.IdleTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratewise: SetLimit(%q) cannot change the scope's identity: %w", l.Name, errors.Join(errs...))
	}
	s.setLimit(l)
	if !l.Adaptive {
		t.shared.ToldGen.Add(1)
	}
	return nil
}

// SetBreakerPolicy makes p, defaults filled in, the policy of the
// transport's breakers, for each breaker's next decision. A key's breaker
// takes p's Window and SuccessesToClose once it is clean (closed, no failure
// counted); an open or half-open one runs its course. Key, Store and
// IdleTimeout may not change; a p with no Store keeps WithStore's. An
// invalid p, or a transport without WithBreaker, is refused.
func (t *Transport) SetBreakerPolicy(p BreakerPolicy) error {
	b := t.breakers
	if b == nil {
		return errors.New("ratewise: SetBreakerPolicy: the transport has no breaker; give it one with WithBreaker")
	}
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.WithDefaults()
	p.Escalation = slices.Clone(p.Escalation)
	if p.Store == nil && t.store != nil {
		p.Store = t.store // WithStore's, as the breakers were built with
	}
	t.reloadMu.Lock()
	defer t.reloadMu.Unlock()
	old := b.config()
	var errs []error
	if !sameKeyFunc(p.Key, old.Key) {
		errs = append(errs, errors.New("its Key"))
	}
	if !sameStore(p.Store, old.Store) {
		errs = append(errs, errors.New("its Store"))
	}
	if p.IdleTimeout != old.IdleTimeout {
		errs = append(errs, fmt.Errorf("its IdleTimeout (%v to %v)", old.IdleTimeout, p.IdleTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratewise: SetBreakerPolicy cannot change what makes the breakers what they are: %w", errors.Join(errs...))
	}
	b.policy.Store(&p)
	b.SetConfig(engineConfig(p, breakerListeners(p.OnStateChange, t.trace)))
	return nil
}

// BreakerPolicy returns the transport's breaker policy, defaults filled
// in, and false when it has no breaker.
func (t *Transport) BreakerPolicy() (BreakerPolicy, bool) {
	if t.breakers == nil {
		return BreakerPolicy{}, false
	}
	p := *t.breakers.config()
	p.Escalation = slices.Clone(p.Escalation)
	return p, true
}

// sameStore reports whether a and b are the same store; stores of a type
// that == cannot compare are taken for different ones.
func sameStore(a, b store.Breakers) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// AddLimit adds the limit scope l to the running transport, from the next
// admission of every request, as WithLimit adds one to a new transport. l
// must validate and its Name (by default "limit N") be new: a scope already
// named so is changed with SetLimit. The LearnedScope stays, learning under
// l what the server refuses. An l that keeps a bucket and names no Store
// takes WithStore's. It is safe to call while requests go through.
func (t *Transport) AddLimit(l Limit) error {
	t.reloadMu.Lock()
	defer t.reloadMu.Unlock()
	scopes := t.scopes()
	if l.Name == "" {
		l.Name = t.nextLimitName()
	}
	l = t.withStore(l)
	if err := l.Validate(); err != nil {
		return err
	}
	if slices.ContainsFunc(scopes, func(s *scope) bool { return s.Name() == l.Name }) {
		return fmt.Errorf("ratewise: AddLimit: a limit scope is already named %q: give the new one another Name, or change that one with SetLimit", l.Name)
	}
	t.addScope(newScope(l, t.shared))
	if l.paces() && !l.Adaptive {
		t.shared.ToldGen.Add(1)
	}
	return nil
}

// nextLimitName is the Name of the next scope given without one: "limit
// N", N counting the scopes given from 1, the LearnedScope New added left
// out.
func (t *Transport) nextLimitName() string {
	n := len(t.scopes()) + 1
	if t.learned != nil {
		n--
	}
	return fmt.Sprintf("limit %d", n)
}

// addScope adds s to the scopes, last but for the LearnedScope New
// added, copying them so that a request going through the old ones keeps
// them whole. In New, or with reloadMu held.
func (t *Transport) addScope(s *scope) {
	old := t.scopes()
	scopes := make([]*scope, len(old), len(old)+1)
	copy(scopes, old)
	scopes = append(scopes, s)
	if n := len(scopes); t.learned != nil && s != t.learned {
		// The LearnedScope New added stays last, where it reports.
		scopes[n-2], scopes[n-1] = scopes[n-1], scopes[n-2]
	}
	t.scopeList.Store(&scopes)
}

// Limits returns the Limits in force, one per scope, in the order given.
func (t *Transport) Limits() []Limit {
	scopes := t.scopes()
	out := make([]Limit, len(scopes))
	for i, s := range scopes {
		out[i] = *s.limit()
	}
	return out
}
