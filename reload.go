package ratewise

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// This file changes a running transport's policies, so that a service can
// turn itself down without a deploy. A change applies from the next
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

// SetLimit replaces the Limit of the scope named l.Name (the Name given to
// WithLimit, or "limit N" for the Nth scope given without one), from the
// next admission of every request. Every field may change but the Name,
// Key, Adaptive and IdleTimeout, which make the scope what it is. Each
// key's bucket keeps the tokens it has under the new rate and burst; a
// raised MaxConcurrent lets waiting requests through at once, and a
// lowered one takes slots back as they free. An invalid l, or one naming
// no scope, is refused and changes nothing.
func (t *Transport) SetLimit(l Limit) error {
	if err := l.Validate(); err != nil {
		return err
	}
	t.reloadMu.Lock() // one SetLimit at a time: each sees the others' paced
	defer t.reloadMu.Unlock()
	s := t.scopeNamed(l.Name)
	if s == nil {
		return fmt.Errorf("ratewise: no limit scope is named %q", l.Name)
	}
	old := s.limit()
	l = l.withDefaults()
	var errs []error
	if !sameKeyFunc(l.Key, old.Key) {
		errs = append(errs, errors.New("its Key"))
	}
	if l.Adaptive != old.Adaptive {
		errs = append(errs, fmt.Errorf("its Adaptive (%v to %v)", old.Adaptive, l.Adaptive))
	}
	if l.IdleTimeout != old.IdleTimeout {
		errs = append(errs, fmt.Errorf("its IdleTimeout (%v to %v)", old.IdleTimeout, l.IdleTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("ratewise: SetLimit(%q) cannot change the scope's identity: %w", l.Name, errors.Join(errs...))
	}
	s.cfg.Store(&l)
	s.gen.Add(1)
	t.updatePaced()
	// Requests waiting for a slot would otherwise not see a raised cap
	// until one frees.
	if l.MaxConcurrent != old.MaxConcurrent {
		s.states.each(func(st *scopeState) {
			st.mu.Lock()
			s.catchUp(st, time.Now())
			st.mu.Unlock()
		})
	}
	return nil
}

// Limits returns the Limits in force, one per scope, in the order given.
func (t *Transport) Limits() []Limit {
	out := make([]Limit, len(t.scopes))
	for i, s := range t.scopes {
		out[i] = *s.limit()
	}
	return out
}

// updatePaced notes whether a scope paces its keys: then the pace, not
// the cooldown gate, answers a wait hint of a second or less.
func (t *Transport) updatePaced() {
	paced := false
	for _, s := range t.scopes {
		l := s.limit()
		paced = paced || l.Adaptive || l.paces()
	}
	t.paced.Store(paced)
}
