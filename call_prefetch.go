package ratewise

import (
	"reflect"

	"github.com/ratewise/ratewise/internal/scopes"
	"github.com/ratewise/ratewise/store"
)

// This file asks a store, in one round trip, everything an attempt asks of
// it before it is sent: its breaker, its pause, a told bucket's token and
// a turn of the fleet's learned pace. Asked one by one, a call that needs
// no help would cost a round trip each. The answers (scopes.Prefetched)
// stand for the attempt's first look at each, as long as it has not
// waited since: a wait makes them old, and the layers ask the store
// again.

// combinable reports whether x is WithStore's store s: then it shares
// through s, which can answer its question with the others.
func combinable(x any, s store.Store) bool {
	if x == nil || s == nil {
		return false
	}
	t := reflect.TypeOf(x)
	return t == reflect.TypeOf(s) && t.Comparable() && x == any(s)
}

// prefetch asks the transport's store.Admitter, once, what the attempt's
// breaker, gate and told bucket would each ask of it, when at least two
// of them keep their state there. A bucket is asked only for a scope
// that has no slots (a slot comes before the turn) and is the one such
// scope of the request in the store. The transport's store is an
// store.Admitter (admitStore is set).
func (c *call) prefetch() {
	c.pre.Stale() // an earlier attempt's answers
	var ask store.AdmitAsk
	parts := 0
	if b := c.t.breakers; b != nil && c.t.breakerInStore {
		ask.Breaker, ask.Rules = b.key(c.req), &b.Config().Rules
		parts++
	}
	if c.t.gateInStore {
		ask.Pause = c.gateKey()
		parts++
	}
	if s, l := c.storeBucket(); s != nil {
		ask.Bucket, ask.N, ask.Rate, ask.Burst = s.StoreKey(s.key(c.req)), 1, l.Rate, l.Burst
		parts++
	}
	if c.t.shared.Learned != nil && c.askLearned(&ask) {
		parts++
	}
	if parts < 2 {
		return
	}
	if ask.Breaker != "" {
		ask.Succeeded = c.t.breakers.Unsaid(ask.Breaker)
	}
	a, err := c.t.admitStore.Admit(c.ctx, &ask)
	if err != nil {
		return // each layer asks for itself, and meets the store's failure there
	}
	if c.pre == nil {
		c.pre = new(scopes.Prefetched)
	}
	c.pre.Fill(&ask, a)
}

// askLearned puts in ask the turn of the fleet's learned pace the first
// adaptive scope that applies to the request would ask the store for,
// and reports whether it did (scopes.Scope.AskLearned).
func (c *call) askLearned(ask *store.AdmitAsk) bool {
	for _, s := range c.t.scopes() {
		if s.Adaptive() && s.appliesTo(c.req) {
			r := c.scopeRequest()
			return s.AskLearned(&r, s.key(c.req), ask)
		}
	}
	return false
}

// storeBucket returns the one told scope applying to the request whose
// bucket WithStore's store keeps, with no slots, and its limit; nil when
// none or several do.
func (c *call) storeBucket() (*scope, *Limit) {
	var found *scope
	var limit *Limit
	for _, s := range c.t.scopes() {
		if s.Adaptive() || !s.appliesTo(c.req) {
			continue
		}
		l := s.limit()
		if l.Store == nil || !combinable(l.Store, c.t.store) {
			continue
		}
		if found != nil || l.MaxConcurrent > 0 {
			return nil, nil
		}
		found, limit = s, l
	}
	return found, limit
}
