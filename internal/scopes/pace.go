package scopes

import (
	"net/http"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// This file is a scope's admission: a concurrency slot, then the
// request's turn by the told limit's engine (internal/limit: bucket,
// spacing or window), the store's bucket, or the learned pace
// (learned.go). The engine says how long to wait; the request waits.

// Grant is what a scope gave a request it let go: a ticket of an
// adaptive scope, to be answered (Ticket.Finish) or withdrawn; a
// concurrency slot, to be released when the response is done with; and
// whether a told window gave it a turn of its count, at once with the
// window's others (a refusal of it then makes the window yield, Yield),
// and whether that turn is the window's probe, whose answer the caller
// tells (ProbeAnswered; see internal/limit's probe.go).
type Grant struct {
	Ticket Ticket
	Slot   Slot
	Window bool
	Probe  bool
	// WindowStart is the start the window's count took for the turn, when
	// Window: an answer's count of the server's quota may say when the
	// server's window that counted it ends (Align).
	WindowStart time.Time
}

// Admit waits until the request may go in the scope under key: a
// concurrency slot, then its turn by the bucket, the spacing, the window
// or the learned pace. A request that must not wait, or not that long,
// gets a *Refusal instead; a wait the call refuses, its error.
func (s *Scope) Admit(r *Request, key string) (Grant, error) {
	if s.Unpaced(key) {
		return Grant{}, nil // an adaptive scope's key that has learned nothing: unpaced
	}
	e := s.states.Acquire(key, true)
	st := &e.State
	s.caughtUp(st)
	cfg := s.cfg.Load()
	var deadline time.Time // when MaxWait runs out
	if cfg.MaxWait > 0 {
		deadline = time.Now().Add(cfg.MaxWait)
	}
	// The slot first, then the turn: a turn taken before a long wait for a
	// slot would be spent late, in a burst with others.
	var g Grant
	if cfg.MaxConcurrent > 0 {
		if err := s.takeSlot(r, key, st, deadline, cfg); err != nil {
			s.states.Release(e)
			return Grant{}, err
		}
		g.Slot = Slot{scope: s, entry: e}
	}
	var err error
	if s.adaptive {
		var turn learnedTurn
		turn, err = s.admitLearned(r, key, st, deadline, cfg)
		if err == nil && (turn.seq != 0 || turn.starting || turn.fleet != nil) {
			s.states.Hold(e) // one hold for the ticket, until the answer
			g.Ticket = Ticket{scope: s, entry: e, seq: turn.seq, fleet: turn.fleet}
			if turn.starting {
				g.Ticket.startKey, g.Ticket.startOthers = key, turn.others
			} else if turn.fleet == nil {
				g.Ticket.a = st.adapt.Load()
			}
		}
	} else {
		g.WindowStart, g.Probe, err = s.pace(r, key, st, deadline, cfg, 1, true)
		g.Window = !g.WindowStart.IsZero()
	}
	switch {
	case err != nil && g.Slot.Held():
		g.Slot.Release()
		return Grant{}, err
	case err != nil:
		s.states.Release(e)
		return Grant{}, err
	case !g.Slot.Held():
		s.states.Release(e) // the slot, when there is one, holds e
	}
	return g, nil
}

// Acquire takes n turns of key's pace for work that is not a request,
// under cfg (the scope's, or a copy that fails fast), waiting at most
// what r's budget, cfg's MaxWait and r's context's deadline leave
// (Request.maxWait): r's whole budget is the caller's own wait.
func (s *Scope) Acquire(r *Request, key string, n int, cfg *Config) error {
	e := s.states.Acquire(key, true)
	defer s.states.Release(e)
	s.caughtUp(&e.State)
	now := time.Now()
	var maxWaitEnd time.Time
	if cfg.MaxWait > 0 {
		maxWaitEnd = now.Add(cfg.MaxWait)
	}
	deadline := now.Add(r.maxWait(now, maxWaitEnd))
	_, _, err := s.pace(r, key, &e.State, deadline, cfg, n, false)
	return err
}

// takeSlot takes one of the key's MaxConcurrent slots, queueing by
// priority when all are taken.
func (s *Scope) takeSlot(r *Request, key string, st *State, deadline time.Time, cfg *Config) error {
	w, err := st.told.TakeSlot(&cfg.Config, r.Priority, deadline)
	if err != nil || w == nil {
		return s.refusal(key, err)
	}
	err = r.waitUntil(s, WaitSlot, w.Ready(), deadline, 0)
	st.told.LeaveQueue(w, err, s.cfg.Load().MaxConcurrent)
	if err != nil {
		return s.waitError(err, key, deadline, r)
	}
	return nil
}

// TrySlot takes one of key's concurrency slots when one is free and no
// request waits for one, and reports whether it did; it holds nothing
// when it did not. It is Admit for a request of a scope that paces
// nothing (Config.Paces), which its slot alone admits, when that slot
// needs no wait: a transport sends such a request with no call around
// it (see the root's transport.go).
func (s *Scope) TrySlot(key string) (Slot, bool) {
	e := s.states.Acquire(key, true)
	st := &e.State
	s.caughtUp(st)
	if st.told.TrySlot(s.cfg.Load().MaxConcurrent) {
		return Slot{scope: s, entry: e}, true
	}
	s.states.Release(e)
	return Slot{}, false
}

// Slot is a concurrency slot a request holds in a scope; the zero Slot
// holds none.
type Slot struct {
	scope *Scope
	entry *keyed.Entry[State]
}

// Held reports whether the slot is one.
func (h Slot) Held() bool { return h.entry != nil }

// Release frees the slot; the first waiter, if any, gets it.
func (h Slot) Release() {
	h.entry.State.told.ReleaseSlot(h.scope.cfg.Load().MaxConcurrent)
	h.scope.states.Release(h.entry)
}

// pace waits for n turns of the key's pace: 1 for a request, n for
// Acquire; at once when the key has no bucket, spacing or window.
// answered says the caller tells the turn's answer, which a told window
// may then take for its probe. It reports the start a told window's
// count took for the turn (zero when none did), and whether the turn is
// the window's probe.
func (s *Scope) pace(r *Request, key string, st *State, deadline time.Time, cfg *Config, n int, answered bool) (windowStart time.Time, probe bool, err error) {
	if !cfg.Paces() {
		return time.Time{}, false, nil // nothing paces (catchUp keeps no bucket for such a limit)
	}
	if cfg.Store != nil {
		storeKey := s.StoreKey(key)
		done, err := s.paceStore(r, key, st, deadline, cfg, storeKey, func(maxWait time.Duration) (time.Duration, error) {
			return cfg.Store.Take(r.Ctx(), storeKey, n, cfg.Rate, cfg.Burst, maxWait)
		})
		if done {
			return time.Time{}, false, err
		}
		// The store failed: the scope's own bucket stands in.
	}
	if ws := s.shared.Windows; ws != nil && cfg.Window > 0 && n == 1 {
		storeKey := s.StoreKey(key)
		done, err := s.paceStore(r, key, st, deadline, cfg, storeKey, func(maxWait time.Duration) (time.Duration, error) {
			return ws.TakeWindow(r.Ctx(), storeKey, cfg.Burst, cfg.Window, maxWait)
		})
		if done {
			return time.Time{}, false, err
		}
		// The store failed: the scope's own window stands in.
	}
	var res limit.Reservation
	for {
		var err error
		if answered && n == 1 {
			err = st.told.ReserveAnswered(&res, r.Low, &cfg.Config, deadline)
		} else {
			err = st.told.Reserve(&res, r.Low, &cfg.Config, n, deadline)
		}
		if err == nil && res.Probe != nil {
			// Another request probes the window: its answer says whether
			// this turn goes at once or in a spread.
			if err := s.awaitProbe(r, key, &res, deadline); err != nil {
				return time.Time{}, false, err
			}
			continue
		}
		if err == nil && res.Delay > 0 {
			err = r.waitFor(s, res.Delay, nil)
			if again := st.told.Waited(&res, err); err == nil && again {
				continue
			}
		}
		if err != nil {
			return time.Time{}, false, s.refusal(key, err)
		}
		return res.WindowStart(), res.Probing, nil
	}
}

// awaitProbe waits for the answer to the probe of key's window res says
// is in flight, until res.ProbeUntil at most (the probe is then taken for
// lost), within what MaxWait (deadline) and the call's budget leave.
func (s *Scope) awaitProbe(r *Request, key string, res *limit.Reservation, deadline time.Time) error {
	now := time.Now()
	if !deadline.IsZero() && !now.Before(deadline) {
		return &Refusal{Scope: s.name, Key: key, Reason: "max-wait"}
	}
	until := res.ProbeUntil
	if !deadline.IsZero() && deadline.Before(until) {
		until = deadline
	}
	d := until.Sub(now)
	if d <= 0 {
		return nil // reserve again: the probe is lost, or MaxWait refuses
	}
	if left := r.Left(); left > 0 && left < d {
		d = left // a budget with less left refuses the next wait
	}
	return r.waitFor(s, d, res.Probe)
}

// Align tells key's told window when the server's window that counted
// the turn that took start ends, as the count of the quota in h, an
// answer's headers at now, says (limit.Key.Align). It reads h only while
// the window takes resets, and looks the key up once.
func (s *Scope) Align(key string, start time.Time, h http.Header, now time.Time) {
	e := s.states.Acquire(key, false)
	if e == nil {
		return // forgotten: nothing to align
	}
	defer s.states.Release(e)
	if e.State.told.Aligned() {
		return
	}
	if count := headers.ReadCount(h, now); count.Remaining >= 0 && count.Reset > 0 {
		// A reset in whole seconds, or at a whole second (a Unix time, an
		// HTTP-date), is given to the second, and may be cut to it.
		reset := now.Add(count.Reset)
		coarse := count.Reset%time.Second == 0 || reset.Nanosecond() == 0
		e.State.told.Align(start, reset, coarse, now, &s.cfg.Load().Config)
	}
}

// ProbeAnswered tells key's told window the answer to its probe: let
// through (ok), or not sent, or failed; a refusal makes it Yield instead.
func (s *Scope) ProbeAnswered(key string, ok bool) {
	e := s.states.Acquire(key, true)
	e.State.told.ProbeAnswered(ok, &s.cfg.Load().Config)
	s.states.Release(e)
}

// paceStore waits for the turn a store gives: take asks it for a turn
// that may be reserved within maxWait (a bucket's tokens, a window's
// start). The store reserves it for a request that may wait for it,
// which then sleeps once and goes, rather than asking again with every
// other waiter at each refill. It reports done false when the store
// failed and the scope's own state must stand in; a store that fails
// closed refuses the request.
func (s *Scope) paceStore(r *Request, key string, st *State, deadline time.Time, cfg *Config, storeKey string,
	take func(maxWait time.Duration) (time.Duration, error)) (done bool, err error) {
	if wait, ok := r.Pre.takeAnswer(storeKey); ok && wait <= 0 {
		return true, nil // taken with the attempt's other questions
	}
	for {
		now := time.Now()
		// Its place in the queue, held while it asks: MaxQueue counts it.
		maxWait := r.maxWait(now, deadline)
		if maxWait > 0 && !st.told.HoldPlace(&cfg.Config) {
			maxWait = 0
		}
		wait, err := take(maxWait)
		reserved := err == nil && wait > 0 && wait <= maxWait
		if maxWait > 0 && !reserved {
			st.told.Dequeue()
		}
		switch {
		case err != nil && r.Ctx().Err() != nil:
			return true, r.Ctx().Err()
		case err != nil && store.FailsClosed(err):
			return true, &Refusal{Scope: s.name, Key: key, Reason: "store-unavailable", Err: err}
		case err != nil:
			return false, nil
		case wait <= 0:
			return true, nil
		}
		if !reserved {
			// Nothing reserved: say why, or wait it out and ask again.
			if err := st.told.Enqueue(wait, now, deadline, &cfg.Config); err != nil {
				return true, s.refusal(key, err)
			}
		}
		err = r.waitFor(s, wait, nil)
		st.told.Dequeue()
		if err != nil || reserved {
			return true, err
		}
		// The wait fit after all (a shared budget another call's wait
		// covers): ask again.
	}
}
