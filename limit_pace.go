package ratewise

import (
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"
)

// This file is a scope's admission: a concurrency slot (limit_slots.go),
// then the request's turn by the bucket, the spacing, the window
// (limit_window.go), the store's bucket, or the learned pace
// (limit_learned.go).

// admit waits until the request may go in this scope: a concurrency slot,
// then its turn by the bucket, the spacing or the adaptive pace. It returns
// the request's number in an adaptive scope's key. A request that must not
// wait, or not that long, gets a *LimitError instead.
func (s *scope) admit(c *call, key string, st *scopeState) (seq uint64, slotted, starting bool, err error) {
	s.caughtUp(st)
	l := s.limit()
	var deadline time.Time // when MaxWait runs out
	if l.MaxWait > 0 {
		deadline = time.Now().Add(l.MaxWait)
	}
	// The slot first, then the turn: a turn taken before a long wait for a
	// slot would be spent late, in a burst with others.
	if l.MaxConcurrent > 0 {
		if err := s.acquireSlot(c, key, st, deadline, l); err != nil {
			return 0, false, false, err
		}
		slotted = true
	}
	if s.adaptive {
		seq, starting, err = s.admitLearned(c, key, st, deadline, l)
	} else {
		err = s.pace(c, key, st, deadline, l, 1)
	}
	if err != nil && slotted {
		s.releaseSlot(st)
		slotted = false
	}
	return seq, slotted, starting, err
}

// turn is a place taken in a key's pace, which can be given back when the
// request does not wait for it after all. Acquire's turns are n places
// at once.
type turn struct {
	reservation *rate.Reservation // future tokens of the bucket
	spacedTo    time.Time         // the nextStart this turn set, with MinSpacing
	before      time.Time         // the nextStart before it
	windowAt    time.Time         // the start this turn took, with a Window
	windowN     int               // how many starts it took there
	// windowFreed is the newest start pushed out of the window to make
	// room for windowAt, and windowFreedOlder the older ones, oldest
	// first, when it took more than one.
	windowFreed      time.Time
	windowFreedOlder []time.Time
	again            bool // no place was taken: wait, then try again
}

// pace waits for n turns of the key's pace: 1 for a request, n for
// Acquire; at once when the key has no bucket, spacing or window.
func (s *scope) pace(c *call, key string, st *scopeState, deadline time.Time, l *Limit, n int) error {
	if !l.paces() {
		return nil // nothing paces (catchUp keeps no bucket for such a limit)
	}
	if l.Store != nil {
		done, err := s.paceShared(c, key, st, deadline, l, n)
		if done {
			return err
		}
		// The store failed: the scope's own bucket stands in.
	}
	for {
		st.mu.Lock()
		if st.bucket == nil && l.MinSpacing <= 0 && l.Window <= 0 { // SetLimit may change the bucket: read it locked
			st.mu.Unlock()
			return nil
		}
		// Read under the lock, so the bucket sees its times in order: an
		// earlier time after a later one would make it count tokens twice.
		now := time.Now()
		delay, t := s.takeTurn(st, now, c.priority, l, n)
		if delay <= 0 {
			st.mu.Unlock()
			return nil
		}
		if err := s.mayWait(st, key, delay, now, deadline, l); err != nil {
			s.giveBackTurn(st, t, now)
			st.mu.Unlock()
			return err
		}
		st.waiting++
		st.mu.Unlock()

		err := c.waitAdmission(delay, WaitPacing)
		st.mu.Lock()
		st.waiting--
		if err != nil {
			s.giveBackTurn(st, t, time.Now())
		}
		st.mu.Unlock()
		if err != nil || !t.again {
			return err
		}
	}
}

// paceShared waits for n tokens of the store's bucket for key. The store
// reserves them for a request that may wait for them, which then
// sleeps once and goes, rather than asking again with every other waiter
// at each refill. It reports done false when the store failed and the
// scope's own bucket must stand in; a store that fails closed refuses the
// request.
func (s *scope) paceShared(c *call, key string, st *scopeState, deadline time.Time, l *Limit, n int) (done bool, err error) {
	storeKey := s.storeKey(key)
	if wait, ok := c.pre.takeAnswer(storeKey); ok && wait <= 0 {
		return true, nil // taken with the attempt's other questions
	}
	for {
		now := time.Now()
		st.mu.Lock()
		maxWait := sharedMaxWait(c, st, now, deadline, l)
		if maxWait > 0 {
			st.waiting++ // its place in the queue, held while it asks: MaxQueue counts it
		}
		st.mu.Unlock()
		wait, err := l.Store.Take(c.ctx, storeKey, n, l.Rate, l.Burst, maxWait)
		reserved := err == nil && wait > 0 && wait <= maxWait
		if maxWait > 0 && !reserved {
			st.dequeue()
		}
		switch {
		case err != nil && c.ctx.Err() != nil:
			return true, c.ctx.Err()
		case err != nil && storeFailedClosed(err):
			return true, &LimitError{Scope: s.name, Key: key, Reason: "store-unavailable", Err: err}
		case err != nil:
			return false, nil
		case wait <= 0:
			return true, nil
		}
		if !reserved {
			// Nothing reserved: say why, or wait it out and ask again.
			if err := s.enqueue(st, key, wait, now, deadline, l); err != nil {
				return true, err
			}
		}
		err = c.waitAdmission(wait, WaitPacing)
		st.dequeue()
		if err != nil || reserved {
			return true, err
		}
		// The wait fit after all (a shared budget another call's wait
		// covers): ask again.
	}
}

// storeKey is key's bucket in the scope's Store: the scope's name, and
// the key unless the scope is Global, so that scopes sharing a store keep
// their buckets apart.
func (s *scope) storeKey(key string) string {
	if s.global {
		return s.name
	}
	return s.name + ":" + key
}

// sharedMaxWait is how long a request may wait for a token the store
// reserves for it, with st.mu held: nothing when it must not queue, else
// what MaxWait, the context's deadline and the call's budget leave. A
// shared budget may let it wait longer; it then asks again after the wait.
func sharedMaxWait(c *call, st *scopeState, now, deadline time.Time, l *Limit) time.Duration {
	if l.FailFast || l.MaxQueue > 0 && st.waiting >= l.MaxQueue {
		return 0
	}
	d := c.budgetLeft()
	if !deadline.IsZero() {
		d = min(d, deadline.Sub(now))
	}
	if end, ok := c.ctx.Deadline(); ok {
		d = min(d, end.Sub(now)-time.Nanosecond) // a wait must end before the deadline
	}
	return max(d, 0)
}

// takeTurn takes n places in the pace, 1 for a request, with st.mu held,
// and returns how long until they come: n tokens of the bucket, n starts
// of the window, or n gaps of the spacing, the first of which is the
// caller's.
func (s *scope) takeTurn(st *scopeState, now time.Time, p Priority, l *Limit, n int) (time.Duration, turn) {
	if l.Window > 0 {
		return st.window.take(now, l.Burst, l.Window, n)
	}
	if st.bucket == nil {
		start := now
		if st.nextStart.After(now) {
			start = st.nextStart
		}
		t := turn{before: st.nextStart, spacedTo: start.Add(time.Duration(n) * spacingGap(l))}
		st.nextStart = t.spacedTo
		return start.Sub(now), t
	}
	if p < PriorityNormal && l.Reserve > 0 {
		// Low priority leaves Reserve tokens: wait until n more are there.
		need := float64(l.Reserve+n) - st.bucket.TokensAt(now)
		if need > 0 {
			return time.Duration(need / float64(st.bucket.Limit()) * float64(time.Second)), turn{again: true}
		}
	}
	if st.bucket.AllowN(now, n) {
		return 0, turn{}
	}
	r := st.bucket.ReserveN(now, n)
	return r.DelayFrom(now), turn{reservation: r}
}

// giveBackTurn undoes takeTurn for a request that will not go, with st.mu
// held: the token returns to the bucket, and a spacing slot or a window's
// turn nobody queued behind is freed.
func (s *scope) giveBackTurn(st *scopeState, t turn, now time.Time) {
	switch {
	case t.reservation != nil:
		t.reservation.CancelAt(now)
	case !t.windowAt.IsZero():
		st.window.giveBack(t)
	case !t.spacedTo.IsZero() && st.nextStart.Equal(t.spacedTo):
		st.nextStart = t.before
	}
}

// spacingGap draws the gap after a request start: MinSpacing ±
// SpacingJitter.
func spacingGap(l *Limit) time.Duration {
	gap := float64(l.MinSpacing)
	if l.SpacingJitter > 0 {
		gap *= 1 + l.SpacingJitter*(2*rand.Float64()-1)
	}
	return time.Duration(gap)
}

// mayWait decides, with st.mu held, whether a request may queue for delay
// (0 when unknown, as for a concurrency slot).
func (s *scope) mayWait(st *scopeState, key string, delay time.Duration, now, deadline time.Time, l *Limit) error {
	var reason string
	switch {
	case l.FailFast:
		reason = "fail-fast"
	case !deadline.IsZero() && (delay > 0 && now.Add(delay).After(deadline) || !now.Before(deadline)):
		reason = "max-wait"
	case l.MaxQueue > 0 && st.waiting >= l.MaxQueue:
		reason = "max-queue"
	default:
		return nil
	}
	return &LimitError{Scope: s.name, Key: key, Reason: reason, RetryIn: delay}
}

// enqueue counts the request among key's waiters, if it may wait delay
// (see mayWait); st.mu must not be held. dequeue undoes it.
func (s *scope) enqueue(st *scopeState, key string, delay time.Duration, now, deadline time.Time, l *Limit) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := s.mayWait(st, key, delay, now, deadline, l); err != nil {
		return err
	}
	st.waiting++
	return nil
}

// dequeue takes a request out of the waiters enqueue counted.
func (st *scopeState) dequeue() {
	st.mu.Lock()
	st.waiting--
	st.mu.Unlock()
}
