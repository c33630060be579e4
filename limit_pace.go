package ratewise

import (
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// This file is a scope's admission: a concurrency slot (limit_scope.go),
// then the request's turn by the told limit's engine (internal/limit:
// bucket, spacing or window), the store's bucket, or the learned pace
// (limit_learned.go). The engine says how long to wait; the call waits.

// admit waits until the request may go in this scope: a concurrency slot,
// then its turn by the bucket, the spacing or the adaptive pace. It returns
// the request's turn in an adaptive scope's key. A request that must not
// wait, or not that long, gets a *ClientLimitError instead.
func (s *scope) admit(c *call, key string, st *scopeState) (turn learnedTurn, slotted bool, err error) {
	s.caughtUp(st)
	l := s.limit()
	var deadline time.Time // when MaxWait runs out
	if l.MaxWait > 0 {
		deadline = time.Now().Add(l.MaxWait)
	}
	// The slot first, then the turn: a turn taken before a long wait for a
	// slot would be spent late, in a burst with others.
	if l.MaxConcurrent > 0 {
		if err := s.acquireSlot(c, key, st, deadline); err != nil {
			return learnedTurn{}, false, err
		}
		slotted = true
	}
	if s.adaptive {
		turn, err = s.admitLearned(c, key, st, deadline, l)
	} else {
		err = s.pace(c, key, st, deadline, l, s.engine(), 1)
	}
	if err != nil && slotted {
		s.releaseSlot(st)
		slotted = false
	}
	return turn, slotted, err
}

// pace waits for n turns of the key's pace: 1 for a request, n for
// Acquire; at once when the key has no bucket, spacing or window. cfg is
// l as the engine takes it.
func (s *scope) pace(c *call, key string, st *scopeState, deadline time.Time, l *Limit, cfg *limit.Config, n int) error {
	if !l.paces() {
		return nil // nothing paces (catchUp keeps no bucket for such a limit)
	}
	if l.Store != nil {
		done, err := s.paceShared(c, key, st, deadline, l, cfg, n)
		if done {
			return err
		}
		// The store failed: the scope's own bucket stands in.
	}
	if ws := c.t.windowStore; ws != nil && l.Window > 0 && n == 1 {
		storeKey := s.storeKey(key)
		done, err := s.paceStore(c, key, st, deadline, cfg, storeKey, func(maxWait time.Duration) (time.Duration, error) {
			return ws.TakeWindow(c.ctx, storeKey, l.Burst, l.Window, maxWait)
		})
		if done {
			return err
		}
		// The store failed: the scope's own window stands in.
	}
	var r limit.Reservation
	for {
		err := st.told.Reserve(&r, c.priority < PriorityNormal, cfg, n, deadline)
		if err == nil && r.Delay > 0 {
			err = c.waitAdmission(r.Delay, WaitPacing)
			if again := st.told.Waited(&r, err); err == nil && again {
				continue
			}
		}
		if err != nil {
			return s.refusal(key, err)
		}
		if r.WindowTurn() {
			c.windowScope, c.windowKey = s, key
		}
		return nil
	}
}

// paceShared waits for n tokens of the store's bucket for key. The store
// reserves them for a request that may wait for them, which then
// sleeps once and goes, rather than asking again with every other waiter
// at each refill. It reports done false when the store failed and the
// scope's own bucket must stand in; a store that fails closed refuses the
// request.
func (s *scope) paceShared(c *call, key string, st *scopeState, deadline time.Time, l *Limit, cfg *limit.Config, n int) (done bool, err error) {
	storeKey := s.storeKey(key)
	return s.paceStore(c, key, st, deadline, cfg, storeKey, func(maxWait time.Duration) (time.Duration, error) {
		return l.Store.Take(c.ctx, storeKey, n, l.Rate, l.Burst, maxWait)
	})
}

// paceStore waits for the turn a store gives: take asks it for a turn
// that may be reserved within maxWait (a bucket's tokens, a window's
// start), as paceShared says.
func (s *scope) paceStore(c *call, key string, st *scopeState, deadline time.Time, cfg *limit.Config, storeKey string,
	take func(maxWait time.Duration) (time.Duration, error)) (done bool, err error) {
	if wait, ok := c.pre.takeAnswer(storeKey); ok && wait <= 0 {
		return true, nil // taken with the attempt's other questions
	}
	for {
		now := time.Now()
		// Its place in the queue, held while it asks: MaxQueue counts it.
		maxWait := sharedMaxWait(c, now, deadline)
		if maxWait > 0 && !st.told.HoldPlace(cfg) {
			maxWait = 0
		}
		wait, err := take(maxWait)
		reserved := err == nil && wait > 0 && wait <= maxWait
		if maxWait > 0 && !reserved {
			st.told.Dequeue()
		}
		switch {
		case err != nil && c.ctx.Err() != nil:
			return true, c.ctx.Err()
		case err != nil && store.FailsClosed(err):
			return true, &ClientLimitError{Scope: s.name, Key: key, Reason: LimitStoreUnavailable, Err: err}
		case err != nil:
			return false, nil
		case wait <= 0:
			return true, nil
		}
		if !reserved {
			// Nothing reserved: say why, or wait it out and ask again.
			if err := st.told.Enqueue(wait, now, deadline, cfg); err != nil {
				return true, s.refusal(key, err)
			}
		}
		err = c.waitAdmission(wait, WaitPacing)
		st.told.Dequeue()
		if err != nil || reserved {
			return true, err
		}
		// The wait fit after all (a shared budget another call's wait
		// covers): ask again.
	}
}

// storeKey is key's state in the scope's Store (its bucket, its learned
// pace): named by the scope's name and the key, no key when the scope is
// Global, so that scopes sharing a store keep theirs apart.
func (s *scope) storeKey(key string) string {
	if s.global {
		return store.ScopeKey(s.name, "")
	}
	return store.ScopeKey(s.name, key)
}

// sharedMaxWait is how long a request may wait for a token the store
// reserves for it: what MaxWait (deadline), the context's deadline and the
// call's budget leave; a request that must not queue at all waits
// nothing (Key.HoldPlace). A shared budget may let it wait longer; it
// then asks again after the wait.
func sharedMaxWait(c *call, now, deadline time.Time) time.Duration {
	d := c.budgetLeft()
	if !deadline.IsZero() {
		d = min(d, deadline.Sub(now))
	}
	if end, ok := c.ctx.Deadline(); ok {
		d = min(d, end.Sub(now)-time.Nanosecond) // a wait must end before the deadline
	}
	return max(d, 0)
}
