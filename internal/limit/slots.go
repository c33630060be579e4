package limit

import (
	"slices"
	"time"
)

// Concurrency slots (Config.MaxConcurrent) are counted in an atomic, so
// that a request that finds one free, and its release when no one waits,
// take no lock. A request that must wait queues under the key's lock, and
// the queue's length is published in an atomic too. A waiter publishes its
// place before it looks at the slots again, and a release frees its slot
// before it looks at the queue: one of the two always sees the other, so
// no slot is freed unseen by a waiter.

// SlotWait is a request waiting for a concurrency slot.
type SlotWait struct {
	ready    chan struct{} // closed when the slot is handed over
	granted  bool          // guarded by the Key's mu
	priority int
}

// Ready is closed when the slot is the request's.
func (w *SlotWait) Ready() <-chan struct{} { return w.ready }

// TakeSlot takes one of k's cfg.MaxConcurrent slots: nil when one was
// free, else the request's place in the queue, behind every waiter of the
// same or a higher priority, for the caller to wait on (Ready) and then
// leave (LeaveQueue). A request that may not wait (until deadline, zero
// for none) gets a *Refusal. The clock is read only for a request that
// finds no slot free.
func (k *Key) TakeSlot(cfg *Config, priority int, deadline time.Time) (*SlotWait, error) {
	if k.TrySlot(cfg.MaxConcurrent) {
		return nil, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.queue) == 0 && k.takeSlot(cfg.MaxConcurrent) {
		return nil, nil
	}
	if err := k.mayWaitLocked(0, time.Now(), deadline, cfg); err != nil {
		return nil, err
	}
	w := &SlotWait{ready: make(chan struct{}), priority: priority}
	at := slices.IndexFunc(k.queue, func(q *SlotWait) bool { return q.priority < w.priority })
	if at < 0 {
		at = len(k.queue)
	}
	k.queue = slices.Insert(k.queue, at, w)
	k.queued.Store(int32(len(k.queue)))
	k.waiting++
	k.grantFreeLocked(cfg.MaxConcurrent) // a slot freed before the queue was seen
	return w, nil
}

// TrySlot takes one of k's limit slots when one is free and no request
// waits for one, and reports whether it did: TakeSlot's way in for a
// request that does not queue.
func (k *Key) TrySlot(limit int) bool { return k.queued.Load() == 0 && k.takeSlot(limit) }

// LeaveQueue ends w's wait: err nil when the slot came, else the wait's
// error, and then w leaves the queue, or, granted the slot as it gave up,
// passes it on under a cap of maxConcurrent.
func (k *Key) LeaveQueue(w *SlotWait, err error, maxConcurrent int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting--
	if err == nil {
		return
	}
	if w.granted {
		k.slots.Add(-1) // granted as we gave up: pass it on
		k.grantFreeLocked(maxConcurrent)
	} else if i := slices.Index(k.queue, w); i >= 0 {
		k.queue = slices.Delete(k.queue, i, i+1)
		k.queued.Store(int32(len(k.queue)))
	}
}

// takeSlot takes a free slot of at most limit, if there is one.
func (k *Key) takeSlot(limit int) bool {
	for {
		n := k.slots.Load()
		if n >= int64(limit) {
			return false
		}
		if k.slots.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// ReleaseSlot frees a concurrency slot; the first waiter, if any, gets
// it. A cap lowered since takes back slots as they free.
func (k *Key) ReleaseSlot(maxConcurrent int) {
	k.slots.Add(-1)
	if k.queued.Load() == 0 {
		return
	}
	k.mu.Lock()
	k.grantFreeLocked(maxConcurrent)
	k.mu.Unlock()
}

// grantFreeLocked gives the free slots to the first waiters, with k.mu
// held; limit 0 means no cap.
func (k *Key) grantFreeLocked(limit int) {
	for len(k.queue) > 0 && (limit == 0 || k.slots.Load() < int64(limit)) {
		k.slots.Add(1)
		w := k.queue[0]
		k.queue = slices.Delete(k.queue, 0, 1)
		k.queued.Store(int32(len(k.queue)))
		w.granted = true
		close(w.ready)
	}
}

// Pending reports the slots taken, the requests waiting (for a slot or a
// turn) and the requests queued for a slot: all zero once every request
// went or gave up.
func (k *Key) Pending() (slots, waiting, queued int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return int(k.slots.Load()), k.waiting, len(k.queue)
}
