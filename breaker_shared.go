package ratewise

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is the breakers' side of a store.Breakers: the shared breaker
// asked before the local one, told each outcome that counts, and told of
// the local breaker's trips.

// admitShared lets an attempt through the breaker the store shares, when
// there is one: an open one waits or refuses as a local one does; a
// half-open one lets its one probe through, and the others wait for its
// outcome, asking the store again, as long as the budget lasts. It
// reports asked false when there is no store, or it failed: that leaves
// the local breaker alone to decide, unless the store fails closed.
func (b *breakers) admitShared(c *call, key string) (sb store.Breaker, asked bool, err error) {
	if b.store == nil {
		return store.Breaker{}, false, nil
	}
	cfg := b.config()
	poll := sharedProbePoll
	for {
		if pre, ok := c.pre.breakerAnswer(key); ok {
			sb, err = pre, nil
		} else {
			sb, err = b.store.BreakerAdmit(c.ctx, key, &cfg.rules)
		}
		switch {
		case err != nil && c.ctx.Err() != nil:
			return sb, false, c.ctx.Err()
		case err != nil && storeFailedClosed(err):
			return sb, false, &CircuitOpenError{Key: key, State: BreakerOpen.String(), Err: err}
		case err != nil:
			return store.Breaker{}, false, nil
		case sb.State == store.HalfOpen && !sb.Probe:
			// Another transport probes: ask again in a while.
			d := min(poll, c.budgetLeft())
			if d <= 0 || cfg.policy.FailFast || c.waitAdmission(d, WaitBreaker) != nil {
				if err := c.ctx.Err(); err != nil {
					return sb, true, err
				}
				return sb, true, &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: sb.Failures}
			}
			poll = min(2*poll, maxSharedProbePoll)
			continue
		case sb.State != store.Open:
			return sb, true, nil
		}
		resetIn := time.Until(sb.Until)
		if resetIn <= 0 {
			continue // over while we asked: ask again, for the probe
		}
		if err := c.waitBreakerReset(key, resetIn, 0); err != nil {
			return sb, true, err
		}
	}
}

// How often an attempt asks the store again while another transport
// holds the shared breaker's probe: at first soon, as a probe's answer
// takes about as long as any request's, then less often, for a probe
// that hangs or a server that is slow.
const (
	sharedProbePoll    = 25 * time.Millisecond
	maxSharedProbePoll = time.Second
)

// releaseProbe gives the store's probe back: the attempt it was granted to
// will not tell an outcome. It is told even when the call was cancelled,
// or every transport would wait out ProbeTimeout.
func (b *breakers) releaseProbe(c *call, key string, id uint64) {
	_ = b.store.BreakerReleaseProbe(context.WithoutCancel(c.ctx), key, id)
}

// outcomeShared tells the store the outcome: every failure, and a success
// when it may clear failures (counted by any transport since the attempt
// was admitted) or closes the breaker. An outcome that does not count gives
// the probe back. A store that fails is left behind: the local breaker has
// counted the outcome.
func (t breakerTicket) outcomeShared(c *call, result error, cause BreakerCause) {
	shared := t.b.store
	switch {
	case shared == nil:
	case result == errBreakerExcluded:
		if t.sharedProbe {
			t.b.releaseProbe(c, t.key, t.sharedProbeID)
		}
	case result == errBreakerFailure:
		_, _ = shared.BreakerFailed(c.ctx, t.key, t.sharedProbe, cause.forStore(), &t.b.config().rules)
	case t.sharedProbe || t.sharedClosed:
		_ = shared.BreakerSucceeded(c.ctx, t.key, t.sharedProbe, &t.b.config().rules)
	}
}

// publishTrip tells the store of a trip of key's local breaker it has not
// heard of yet, so that every transport sharing it opens too. Only a
// store that heard it marks it told: a failed telling is tried again by
// the next attempt's outcome or refusal.
func (b *breakers) publishTrip(ctx context.Context, key string, st *breakerState) {
	shared := b.store
	if shared == nil {
		return
	}
	st.mu.Lock()
	trip := store.Trip{OpenedAt: st.openedAt, Until: st.openUntil, Level: st.level, Cause: st.cause.forStore()}
	published := st.sharedUntil
	st.mu.Unlock()
	until := trip.Until
	if !until.After(published) || !until.After(time.Now()) {
		return
	}
	if shared.BreakerTripped(ctx, key, trip, &b.config().rules) != nil {
		return
	}
	st.mu.Lock()
	if until.After(st.sharedUntil) {
		st.sharedUntil = until
	}
	st.mu.Unlock()
}
