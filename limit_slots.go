package ratewise

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
)

// This file is a call's side of a limit scope's concurrency slots
// (Limit.MaxConcurrent): the engine (internal/limit) hands them out by
// priority; an attempt waits for one, and its response body holds it.

// acquireSlot takes one of the key's MaxConcurrent slots, queueing by
// priority when all are taken.
func (s *scope) acquireSlot(c *call, key string, st *scopeState, deadline time.Time) error {
	cfg := s.engine()
	w, err := st.told.TakeSlot(cfg, int(c.priority), deadline)
	if err != nil || w == nil {
		return s.refusal(key, err)
	}
	err = c.waitUntil(w.Ready(), deadline, WaitConcurrency, 0)
	st.told.LeaveQueue(w, err, s.limit().MaxConcurrent)
	if err != nil {
		return s.waitError(err, key, deadline, c)
	}
	return nil
}

// releaseSlot frees a concurrency slot; the first waiter, if any, gets
// it.
func (s *scope) releaseSlot(st *scopeState) { st.told.ReleaseSlot(s.limit().MaxConcurrent) }

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
