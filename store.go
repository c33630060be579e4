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
