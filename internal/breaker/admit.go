package breaker

import (
	"errors"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/ratewise/ratewise/store"
)

// Verdict is what an attempt must do before it may go through its key's
// breaker. Exactly one of its cases holds; none means look again at once.
type Verdict struct {
	// Go: the attempt goes, with the Ticket returned beside the verdict.
	Go bool
	// OpenFor: the breaker is open for this long; wait, then ask again.
	OpenFor time.Duration
	// Woken: half-open with every probe taken; it is closed when the
	// probes' outcome (or a probe given back) may let the attempt through.
	Woken <-chan struct{}
	// Refused: open, with nothing to wait for.
	Refused bool
	// Failures is the count of failures that led to the last trip.
	Failures int
}

// TryClean is Acquire and TryLocal at once, for the most common breaker:
// one with no store, clean (closed, no failure counted) and built under
// the config in force. It sets t, the zero Ticket, to the attempt's
// ticket, which holds key's entry, and reports true. Otherwise it takes
// nothing and reports false: the caller goes through Acquire and
// TryLocal.
func (b *Breakers) TryClean(t *Ticket, key string) bool {
	if b.store != nil {
		return false
	}
	e := b.states.Acquire(key, true)
	st := &e.State
	gen := st.gen.Load() // before clean, as TryLocal reads them
	if st.clean.Load() && st.built.Load() == b.Config().gen {
		t.setFast(b, key, e, gen)
		return true
	}
	b.states.Release(e)
	return false
}

// TryLocal looks once at e, key's breaker in this process: a clean one
// lets the attempt go on the fast path, an open one says how long it
// stays so, a half-open one grants a probe while slots remain. A verdict
// Go sets t, the caller's, to the attempt's ticket.
func (b *Breakers) TryLocal(t *Ticket, key string, e *Entry) Verdict {
	st := &e.State
	gen := st.gen.Load()
	if st.clean.Load() {
		t.setFast(b, key, e, gen)
		return Verdict{Go: true}
	}
	st.mu.Lock()
	// wakes is read before asking gobreaker, so that a probe done after
	// the asking wakes the attempt it refused.
	openUntil, fails, wakes := st.openUntil, st.tripFails, st.wakes
	st.mu.Unlock()
	if !openUntil.IsZero() {
		if resetIn := time.Until(openUntil); resetIn > 0 {
			return Verdict{OpenFor: resetIn, Failures: fails}
		}
	}
	done, err := st.cb.Load().Allow()
	b.report(key, st, nil)
	switch {
	case errors.Is(err, gobreaker.ErrOpenState):
		// Not expected: gobreaker's timeout ends before our openUntil.
		return Verdict{Refused: true, Failures: fails}
	case err != nil: // half-open with every probe taken
		return probesTaken(st, wakes, fails)
	}
	st.mu.Lock()
	probe := st.state == store.HalfOpen
	if probe && st.probes >= b.Config().HalfOpenProbes {
		st.mu.Unlock()
		done(errExcluded)
		return probesTaken(st, wakes, fails)
	}
	if probe {
		st.probes++
	}
	st.mu.Unlock()
	*t = Ticket{b: b, key: key, entry: e, done: done}
	if probe {
		t.probe = &probeGuard{ticket: *t} // its timer starts when the probe is sent
	}
	return Verdict{Go: true}
}

// probesTaken is the verdict for an attempt that found every probe slot
// taken, having seen wakes: wait for the next wake, or, when one came
// already, look again.
func probesTaken(st *state, seen uint64, fails int) Verdict {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.wakes != seen {
		return Verdict{}
	}
	if st.woken == nil {
		st.woken = make(chan struct{})
	}
	return Verdict{Woken: st.woken, Failures: fails}
}

// setFast sets t, the caller's, to the ticket of an attempt a clean
// breaker let go on the fast path. Field by field: t is the zero Ticket,
// but for a caller that neither told nor cancelled the last one; a whole
// Ticket written through a pointer costs a write barrier per pointer.
func (t *Ticket) setFast(b *Breakers, key string, e *Entry, gen uint64) {
	if t.b != nil {
		*t = Ticket{}
	}
	t.b, t.key, t.entry, t.fast, t.gen = b, key, e, true, gen
}
