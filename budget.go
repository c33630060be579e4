package ratewise

import (
	"sync"
	"time"
)

// budget is a wait budget shared by calls. It is spent by the time during
// which at least one of them waits: waits that overlap are paid for once,
// so that two calls waiting out the same 30 seconds spend 30 seconds of
// it, as a person watching them would count. A wait of known length is
// paid for before it starts, so that concurrent calls never overspend the
// budget together; a wait for a concurrency slot, of unknown length, is
// bounded by what is left when it starts and paid for when it ends.
type budget struct {
	mu      sync.Mutex
	left    time.Duration // guarded by mu
	covered time.Time     // the end of the furthest wait paid for; guarded by mu
}

func newBudget(d time.Duration) *budget {
	return &budget{left: max(d, 0)}
}

// take pays for a wait of d starting at now: the part of it that no wait
// already paid for covers. It returns what it charged, or false, charging
// nothing, when that does not fit.
func (b *budget) take(now time.Time, d time.Duration) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	end := now.Add(max(d, 0))
	charge := max(end.Sub(laterOf(now, b.covered)), 0)
	if charge > b.left {
		return 0, false
	}
	b.left -= charge
	b.covered = laterOf(b.covered, end)
	return charge, true
}

// giveBack returns, for a wait paid for until end that ended early at now,
// the time after now that it alone covered, at most what it was charged.
func (b *budget) giveBack(now, end time.Time, charged time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.covered.Equal(end) || !end.After(now) {
		return // a later wait covers that time: it is still being waited
	}
	refund := min(end.Sub(now), charged)
	b.left += refund
	b.covered = end.Add(-refund)
}

// spend pays, at now, for a wait of unknown length that started at start:
// the part no wait already paid for covers, as much of it as is left.
func (b *budget) spend(start, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left = max(b.left-max(now.Sub(laterOf(start, b.covered)), 0), 0)
	b.covered = laterOf(b.covered, now)
}

// remaining is what is left to wait.
func (b *budget) remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.left
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
