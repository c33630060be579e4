package ratewise

import (
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
)

// This file is a limit scope's concurrency slots (Limit.MaxConcurrent).
//
// Slots are counted in an atomic, so that a request that
// finds one free, and its release when no one waits, take no lock. A
// request that must wait queues under the scope state's lock, and the
// queue's length is published in an atomic too. A waiter publishes its
// place before it looks at the slots again, and a release frees its slot
// before it looks at the queue: one of the two always sees the other, so
// no slot is freed unseen by a waiter.

// slotWaiter is a request waiting for a concurrency slot.
type slotWaiter struct {
	ready    chan struct{} // closed when the slot is handed over
	granted  bool          // guarded by the scopeState's mu
	priority Priority
}

// acquireSlot takes one of the key's MaxConcurrent slots, queueing by
// priority when all are taken.
func (s *scope) acquireSlot(c *call, key string, st *scopeState, deadline time.Time, l *Limit) error {
	if st.queued.Load() == 0 && st.takeSlot(l.MaxConcurrent) {
		return nil
	}
	st.mu.Lock()
	if len(st.queue) == 0 && st.takeSlot(l.MaxConcurrent) {
		st.mu.Unlock()
		return nil
	}
	if err := s.mayWait(st, key, 0, time.Now(), deadline, l); err != nil {
		st.mu.Unlock()
		return err
	}
	w := &slotWaiter{ready: make(chan struct{}), priority: c.priority}
	// Behind every waiter of the same or a higher priority.
	at := slices.IndexFunc(st.queue, func(q *slotWaiter) bool { return q.priority < w.priority })
	if at < 0 {
		at = len(st.queue)
	}
	st.queue = slices.Insert(st.queue, at, w)
	st.queued.Store(int32(len(st.queue)))
	st.waiting++
	s.grantFreeLocked(st, l.MaxConcurrent) // a slot freed before the queue was seen
	st.mu.Unlock()

	err := c.waitUntil(w.ready, deadline, WaitConcurrency, 0)
	st.mu.Lock()
	st.waiting--
	if err != nil {
		if w.granted {
			st.slots.Add(-1) // granted as we gave up: pass it on
			s.grantFreeLocked(st, s.limit().MaxConcurrent)
		} else if i := slices.Index(st.queue, w); i >= 0 {
			st.queue = slices.Delete(st.queue, i, i+1)
			st.queued.Store(int32(len(st.queue)))
		}
	}
	st.mu.Unlock()
	if err != nil {
		return s.waitError(err, key, deadline, c)
	}
	return nil
}

// takeSlot takes a free slot of at most limit, if there is one.
func (st *scopeState) takeSlot(limit int) bool {
	for {
		n := st.slots.Load()
		if n >= int64(limit) {
			return false
		}
		if st.slots.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// releaseSlot frees a concurrency slot; the first waiter, if any, gets
// it. A cap lowered by SetLimit takes back slots as they free.
func (s *scope) releaseSlot(st *scopeState) {
	st.slots.Add(-1)
	if st.queued.Load() == 0 {
		return
	}
	st.mu.Lock()
	s.grantFreeLocked(st, s.limit().MaxConcurrent)
	st.mu.Unlock()
}

// grantFreeLocked gives the free slots to the first waiters, with st.mu
// held; limit 0 means no cap.
func (s *scope) grantFreeLocked(st *scopeState, limit int) {
	for len(st.queue) > 0 && (limit == 0 || st.slots.Load() < int64(limit)) {
		st.slots.Add(1)
		w := st.queue[0]
		st.queue = slices.Delete(st.queue, 0, 1)
		st.queued.Store(int32(len(st.queue)))
		w.granted = true
		close(w.ready)
	}
}

// heldSlot is a concurrency slot a request holds in a scope.
type heldSlot struct {
	scope *scope
	entry *keyed.Entry[scopeState]
}

// heldSlots are the slots an attempt holds, one per scope with a
// MaxConcurrent.
type heldSlots struct{ holds[heldSlot] }

// release frees every slot held and forgets them.
func (h *heldSlots) release() { h.drain(heldSlot.free) }

func (s heldSlot) free() {
	s.scope.releaseSlot(&s.entry.State)
	s.scope.states.Release(s.entry)
}

// slotBody is a response body whose request holds concurrency slots; they
// are freed when the body is closed or read to its end.
type slotBody struct {
	io.ReadCloser
	released atomic.Bool
	slots    heldSlots
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// release frees the slots the first time only; a Close racing a Read's
// end frees them once.
func (b *slotBody) release() {
	if b.released.CompareAndSwap(false, true) {
		b.slots.release()
	}
}
