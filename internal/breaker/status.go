package breaker

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/store"
)

// Status is a key's breaker as a status reports it.
type Status struct {
	State store.State
	// ResetIn is the time left before an open breaker lets a probe through.
	ResetIn time.Duration
	Level   int
	// Requests, Failures and ConsecutiveFailures are gobreaker's counts.
	Requests, Failures, ConsecutiveFailures uint32
	OpenedAt                                time.Time
	Cause                                   store.Cause
}

// Status is key's breaker: this process's, and the one its store shares,
// whichever holds requests back longer. A store that fails closed shows
// it open; any other failure leaves this process's own view.
func (b *Breakers) Status(key string, now time.Time) Status {
	out := b.localStatus(key, now)
	if b.store != nil {
		b.addShared(&out, key, now)
	}
	return out
}

// localStatus is key's breaker in this process.
func (b *Breakers) localStatus(key string, now time.Time) Status {
	e := b.states.Peek(key)
	if e == nil {
		return Status{State: store.Closed}
	}
	defer b.states.Release(e)
	st := &e.State
	cb := st.cb.Load()
	if cb == nil {
		return Status{State: store.Closed}
	}
	state := fromGobreaker(cb.State()) // gobreaker's lock, then ours: never both
	counts := cb.Counts()
	b.report(key, st, nil) // State may have moved it to half-open
	cfg := b.Config()
	st.mu.Lock()
	defer st.mu.Unlock()
	out := Status{State: state, Level: levelAt(st, now, cfg), Requests: counts.Requests,
		Failures: counts.TotalFailures, ConsecutiveFailures: counts.ConsecutiveFailures,
		OpenedAt: st.openedAt, Cause: st.cause}
	if resetIn := st.openUntil.Sub(now); resetIn > 0 {
		out.State, out.ResetIn = store.Open, resetIn
	}
	return out
}

// addShared folds into out the breaker the store shares for key: open
// there, opened by another transport, it is open here too; half-open
// there, another transport probes and this one's requests wait for it.
// Status reads take no context: the store's calls are bounded by its own
// timeout.
func (b *Breakers) addShared(out *Status, key string, now time.Time) {
	sb, err := b.store.BreakerRead(context.Background(), key, &b.Config().Rules)
	switch {
	case err != nil && store.FailsClosed(err):
		out.State = store.Open
		return
	case err != nil:
		return
	}
	switch resetIn := sb.Until.Sub(now); {
	case sb.State == store.Open && resetIn > 0:
		out.State, out.ResetIn = store.Open, max(out.ResetIn, resetIn)
	case sb.State == store.HalfOpen && out.State == store.Closed:
		out.State = store.HalfOpen
	}
	out.Level = max(out.Level, sb.Level)
	if sb.OpenedAt.After(out.OpenedAt) {
		out.OpenedAt, out.Cause = sb.OpenedAt, sb.Cause
	}
}
