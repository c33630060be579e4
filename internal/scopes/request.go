package scopes

import (
	"context"
	"time"
)

// Request is what the engine takes of a call that asks for its turn:
// values, and the functions by which the call waits, within its budget,
// where a scope says. The call makes one for an attempt, and gives it to
// each scope it goes through. Its pointers are functions, which the
// engine only calls, so that a call whose Request lives on its stack
// stays there.
type Request struct {
	// Ctx is the call's context.
	Ctx func() context.Context
	// Priority is the request's, as internal/limit orders slot waiters;
	// Low is set below the normal one: it leaves a bucket's Reserve.
	Priority int
	Low      bool
	// Told is the told limits that pace the request, which an adaptive
	// scope paces it under.
	Told Told
	// Pre is what a store answered of the attempt's questions together;
	// nil for nothing.
	Pre *Prefetched
	// Sent is the number of the transport's attempt, for a learned pace's
	// read of an answer no pace let go; 0 for none.
	Sent int64
	// Wait waits as w says, within the call's budget: it returns the
	// budget's error, or the context's, when the wait is refused or cut
	// short. Left is what the budget has left to wait.
	Wait func(w Wait) error
	Left func() time.Duration
}

// Told is what the told limits (a Rate, a MinSpacing or a Window) that
// apply to a request say of it: On when one paces it; the fastest one's
// pace, in requests a second (the slower ones still pace the request
// themselves); their FailFast and least MaxWait, which bound the wait for
// a pace learned under them too.
type Told struct {
	On       bool
	Rate     float64
	FailFast bool
	MaxWait  time.Duration
}

// Add counts cfg, a told limit applying to the request, in t.
func (t *Told) Add(cfg *Config) {
	if !cfg.Paces() {
		return
	}
	if r := cfg.Pace(); !t.On || r > t.Rate {
		t.Rate = r
	}
	if cfg.MaxWait > 0 && (t.MaxWait == 0 || cfg.MaxWait < t.MaxWait) {
		t.MaxWait = cfg.MaxWait
	}
	t.FailFast = t.FailFast || cfg.FailFast
	t.On = true
}

// WaitKind is what a wait is for.
type WaitKind uint8

const (
	// WaitTurn is a wait for a turn of a pace, told or learned.
	WaitTurn WaitKind = iota
	// WaitSlot is a wait for a concurrency slot.
	WaitSlot
)

// Wait is one wait a scope asks of a call: of D, reserved from the
// budget, ended early when Ready closes (never, when nil); or, Open, of
// unknown length, for Ready, bounded by the budget and Until (when set),
// the time taken from the budget afterwards, Expected what is known of
// it. Scope is the scope that asks.
type Wait struct {
	Kind     WaitKind
	Scope    string
	D        time.Duration
	Ready    <-chan struct{}
	Open     bool
	Until    time.Time
	Expected time.Duration
}

// waitFor asks r to wait d for a turn of s, ended early when ready
// closes.
func (r *Request) waitFor(s *Scope, d time.Duration, ready <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	return r.Wait(Wait{Kind: WaitTurn, Scope: s.name, D: d, Ready: ready})
}

// waitUntil asks r to wait for ready, of kind in s, until until at most
// (when set).
func (r *Request) waitUntil(s *Scope, kind WaitKind, ready <-chan struct{}, until time.Time, expected time.Duration) error {
	return r.Wait(Wait{Kind: kind, Scope: s.name, Ready: ready, Open: true, Until: until, Expected: expected})
}

// maxWait is how long a request may wait for a turn a store reserves for
// it: what MaxWait (deadline), the context's deadline and the call's
// budget leave. A shared budget may let it wait longer; it then asks
// again after the wait.
func (r *Request) maxWait(now, deadline time.Time) time.Duration {
	d := r.Left()
	if !deadline.IsZero() {
		d = min(d, deadline.Sub(now))
	}
	if end, ok := r.Ctx().Deadline(); ok {
		d = min(d, end.Sub(now)-time.Nanosecond) // a wait must end before the deadline
	}
	return max(d, 0)
}

// waitError is the error of a wait for a turn that ended early: a
// *Refusal when MaxWait (deadline) ran out, else err.
func (s *Scope) waitError(err error, key string, deadline time.Time, r *Request) error {
	if !deadline.IsZero() && !time.Now().Before(deadline) && r.Ctx().Err() == nil {
		return &Refusal{Scope: s.name, Key: key, Reason: "max-wait"}
	}
	return err
}
