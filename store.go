package ratewise

import (
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is the root's side of the store seam (package store holds
// what a store implements): the fail-closed error callers match, and what
// a breaker policy tells a store.

// ErrStoreUnavailable is [store.ErrUnavailable]: a store that fails closed
// wraps it, and a request refused so gets an error that matches it, a
// *ClientLimitError or a *CircuitOpenError.
var ErrStoreUnavailable = store.ErrUnavailable

// Rules returns what a store needs of p, defaults filled in.
func (p BreakerPolicy) Rules() store.Rules {
	d := p.WithDefaults()
	window := d.Window
	failures := d.ConsecutiveFailures
	r := store.Rules{ConsecutiveFailures: failures, WindowFailures: d.WindowFailures, Window: window,
		Decay: d.Decay, ProbeTimeout: d.ProbeTimeout, RetripWindow: max(d.RetripWindow, 0)}
	r.Cooldowns = append([]time.Duration{d.Cooldown}, d.Escalation...)
	return r
}

// What follows is WithStore: one option that puts in a store what a fleet of
// replicas shares, rather than a store threaded through each policy.

// WithStore shares through s what a fleet of replicas holds in common, so
// that replicas given the same store behave as one client: the buckets of
// told limits, the pause gate's pauses, the breakers' trips, and, when s is
// a store.Learned and a store.Windows (MemoryStore and ratewise/redis's
// are), what the learned pace learns and the starts of told windows. A
// Store set on a Limit, a PausePolicy or a BreakerPolicy wins over it; it
// adds nothing that is not configured, and a spacing stays each
// transport's own. A nil s changes nothing. See "Fleets and stores" in the
// package doc.
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
	if ls, ok := t.store.(store.Learned); ok {
		t.shared.Learned = ls
	}
	if ws, ok := t.store.(store.Windows); ok {
		t.shared.Windows = ws
	}
	if as, ok := t.store.(store.Admitter); ok {
		t.admitStore = as
		t.breakerInStore = t.breakers != nil && combinable(t.breakers.Store(), t.store)
		if t.breakerInStore {
			t.breakers.TellLate() // a success rides on the next admission
		}
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
