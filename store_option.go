package ratewise

import "github.com/ratewise/ratewise/store"

// This file is WithStore: one option that puts in a store what a fleet of
// replicas shares, rather than a store threaded through each policy.

// WithStore shares through store what the transport keeps per key and a
// fleet of replicas holds in common, so that replicas given the same
// store behave as one client:
//
//   - every told Limit that keeps a token bucket (a finite Rate, and no
//     MinSpacing, Reserve or Window), given by WithLimit, AddLimit or
//     SetLimit, takes its turns from the store's bucket;
//   - the pause gate's pauses are the store's: a refusal one replica
//     sees pauses the key in all;
//   - the breakers, when WithBreaker adds them, count failures and trip
//     together.
//
// A Store set on a Limit, a PausePolicy or a BreakerPolicy wins over
// this one, whatever the order of the options. WithStore adds nothing
// that is not configured: no breaker without WithBreaker, and no gate
// when the PausePolicy is Off. A window (Limit.Window), a spacing and
// the learned pace stay each transport's own. A store that is an
// store.Admitter, as both MemoryStore and ratewise/redis's Store are, is
// asked once before each attempt for its breaker, its pause and its told
// bucket together, rather than once for each. A nil store changes
// nothing.
func WithStore(s store.Store) Option {
	return func(t *Transport) { t.store = s }
}

// shareThroughStore gives the transport's store, if any, to what New built
// from the options, which have all been applied: the told scopes, the gate
// and the breakers that have no store of their own.
func (t *Transport) shareThroughStore() {
	if t.store == nil {
		return
	}
	for _, s := range t.scopes() {
		if old := s.limit(); old.Store == nil {
			if l := t.withStore(*old); l.Store != nil {
				s.setLimit(l)
			}
		}
	}
	if t.gate != nil && t.gate.Store() == nil {
		t.gate.SetStore(t.store)
	}
	if b := t.breakers; b != nil && b.Store() == nil {
		p := *b.config()
		p.Store = t.store
		b.policy.Store(&p)
		b.SetStore(t.store)
	}
	if as, ok := t.store.(store.Admitter); ok {
		t.admitStore = as
		t.breakerInStore = t.breakers != nil && combinable(t.breakers.Store(), t.store)
		t.gateInStore = t.gate != nil && combinable(t.gate.Store(), t.store)
	}
}

// withStore is l with the transport's store, for AddLimit and SetLimit,
// when l keeps a token bucket and names no store of its own.
func (t *Transport) withStore(l Limit) Limit {
	if t.store != nil && l.Store == nil && l.keepsBucket() {
		l.Store = t.store
	}
	return l
}
