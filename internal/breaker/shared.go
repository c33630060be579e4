package breaker

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is the breakers' side of a store.Breakers: the shared breaker
// asked before the local one, told each outcome that counts, and told of
// the local breaker's trips.

// AskShared reads key's shared breaker for an attempt about to be sent:
// asked, when ok, is the store's answer asked ahead, standing for it. A
// half-open one grants its probe to one attempt at a time; the caller of
// one that did not get it asks again after SharedProbePoll (doubling up
// to MaxSharedProbePoll), an open one after its Until.
func (b *Breakers) AskShared(ctx context.Context, key string, asked store.Breaker, ok bool) (store.Breaker, error) {
	if ok {
		return asked, nil
	}
	return b.store.BreakerAdmit(ctx, key, &b.Config().Rules)
}

// How often an attempt asks the store again while another transport
// holds the shared breaker's probe: at first soon, as a probe's answer
// takes about as long as any request's, then less often, for a probe
// that hangs or a server that is slow.
const (
	SharedProbePoll    = 25 * time.Millisecond
	MaxSharedProbePoll = time.Second
)

// ReleaseProbe gives the store's probe id back: the attempt it was
// granted to will not tell an outcome. It is told even when ctx was
// cancelled, or every transport would wait out ProbeTimeout.
func (b *Breakers) ReleaseProbe(ctx context.Context, key string, id uint64) {
	_ = b.store.BreakerReleaseProbe(context.WithoutCancel(ctx), key, id)
}

// outcomeShared tells the store the outcome: every failure, and a success
// when it may clear failures (counted by any transport since the attempt
// was admitted) or closes the breaker. An outcome that does not count gives
// the probe back. A store that fails is left behind: the local breaker has
// counted the outcome.
func (t *Ticket) outcomeShared(ctx context.Context, result error, cause store.Cause) {
	shared := t.b.store
	switch {
	case shared == nil:
	case result == errExcluded:
		if t.sharedProbe {
			t.b.ReleaseProbe(ctx, t.key, t.sharedProbeID)
		}
	case result == errFailure:
		_, _ = shared.BreakerFailed(ctx, t.key, t.sharedProbe, cause, &t.b.Config().Rules)
	case t.sharedClosed && !t.sharedProbe && t.b.tellsLate && t.sharedFailures == 0:
		// Nothing counted when it was admitted: the success clears only
		// what other transports count while it was in flight, which the
		// next admission may tell without a round trip of its own.
		t.b.sayLater(t.key, t.entry, t.sharedGen+1)
	case t.sharedProbe || t.sharedClosed:
		_ = shared.BreakerSucceeded(ctx, t.key, t.sharedProbe, &t.b.Config().Rules)
	}
}

// UnsaidFor is how long a success told late waits for an admission to
// tell it before it is told by itself.
const UnsaidFor = 100 * time.Millisecond

// TellLate makes a success of an attempt the shared breaker admitted with
// no failure counted be told to the store with the key's next admission
// (Unsaid), or after UnsaidFor: for a caller that asks the store through
// an Admitter, whose AdmitAsk.Succeeded takes it. Call it before use.
func (b *Breakers) TellLate() { b.tellsLate = true }

// Unsaid takes key's success not told yet, for AdmitAsk.Succeeded: 0 when
// there is none.
func (b *Breakers) Unsaid(key string) uint64 {
	e := b.states.Peek(key)
	if e == nil {
		return 0
	}
	defer b.states.Release(e)
	return e.State.unsaid.Swap(0)
}

// sayLater keeps a success to tell the store, admitted at its Gen gen-1,
// and starts the timer that tells it when no admission does.
func (b *Breakers) sayLater(key string, e *Entry, gen uint64) {
	st := &e.State
	for {
		old := st.unsaid.Load()
		if old >= gen {
			return
		}
		if st.unsaid.CompareAndSwap(old, gen) {
			if old != 0 {
				return // the timer is on its way
			}
			break
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.unsaidTimer == nil {
		st.unsaidTimer = time.AfterFunc(UnsaidFor, func() {
			if st.unsaid.Swap(0) != 0 {
				_ = b.store.BreakerSucceeded(context.Background(), key, false, &b.Config().Rules)
			}
		})
		return
	}
	st.unsaidTimer.Reset(UnsaidFor)
}

// PublishTrip tells the store of a trip of e's breaker, key's, it has not
// heard of yet, so that every transport sharing it opens too. Only a store
// that heard it marks it told: a failed telling is tried again by the next
// attempt's outcome or refusal.
func (b *Breakers) PublishTrip(ctx context.Context, key string, e *Entry) {
	st := &e.State
	shared := b.store
	if shared == nil {
		return
	}
	st.mu.Lock()
	trip := store.Trip{OpenedAt: st.openedAt, Until: st.openUntil, Level: st.level, Cause: st.cause}
	published := st.sharedUntil
	st.mu.Unlock()
	until := trip.Until
	if !until.After(published) || !until.After(time.Now()) {
		return
	}
	if shared.BreakerTripped(ctx, key, trip, &b.Config().Rules) != nil {
		return
	}
	st.mu.Lock()
	if until.After(st.sharedUntil) {
		st.sharedUntil = until
	}
	st.mu.Unlock()
}
