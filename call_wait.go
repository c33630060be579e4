package ratewise

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Every wait of a call (a retry's backoff, a cooldown, a pace, a breaker's
// reset, a concurrency slot) goes through the functions below: bounded by
// the call's wait budget and its context's deadline, ended at once by its
// context, and counted in its stats. The budget is the call's own
// TotalWaitCap, or one that calls share (WithBudget, below).

// pastDeadlineError is a wait refused because it would last until the
// context's deadline. It matches context.DeadlineExceeded, the deadline's
// own error, but tells itself apart from a network timeout, which matches
// it too.
type pastDeadlineError struct{ wait time.Duration }

func (e pastDeadlineError) Error() string {
	return fmt.Sprintf("a wait of %v would reach the context deadline: %v", e.wait, context.DeadlineExceeded)
}

func (e pastDeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// reserve takes a wait of d from the call's budget. It refuses, taking
// nothing, a wait that does not fit in the budget left (ErrBudgetExhausted)
// or that would last until the context's deadline, leaving no time to send
// (context.DeadlineExceeded); one that fits neither, with the error of the
// tighter bound.
func (c *call) reserve(d time.Duration) error {
	d = max(d, 0)
	if deadline, ok := c.ctx.Deadline(); ok {
		// A wait that fits neither is refused by the tighter of the two:
		// with seconds left before its deadline, a call that gives up on a
		// smaller budget gave up on its budget.
		if left := time.Until(deadline); left <= d && c.budgetLeft() >= left {
			return pastDeadlineError{d}
		}
	}
	if c.shared != nil {
		now := time.Now()
		charged, ok := c.shared.take(now, d)
		if !ok {
			return fmt.Errorf("a wait of %v does not fit: %w", d, ErrBudgetExhausted)
		}
		c.paidUntil, c.paidCharge = now.Add(d), charged
		return nil
	}
	if d > c.waitLeft {
		return fmt.Errorf("a wait of %v does not fit: %w", d, ErrBudgetExhausted)
	}
	c.waitLeft -= d
	return nil
}

// wait sleeps for d, already reserved, or until the context ends. A wait
// cut short gives the unused part back to the budget.
func (c *call) wait(d time.Duration, kind WaitKind) error {
	return c.waitOr(d, kind, nil)
}

// waitOr is wait, ended early too when ready closes (never, when nil).
func (c *call) waitOr(d time.Duration, kind WaitKind, ready <-chan struct{}) error {
	if err := c.ctx.Err(); err != nil {
		c.giveBack(d)
		return err
	}
	if d <= 0 {
		return nil
	}
	c.pre.stale()
	c.traceWait(kind, d)
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		c.waitEnded(kind, d, d, nil)
		return nil
	case <-ready:
		waited := time.Since(start)
		c.waitEnded(kind, d, waited, nil)
		c.giveBack(d - waited)
		return nil
	case <-c.ctx.Done():
		waited := time.Since(start)
		err := c.ctx.Err()
		c.waitEnded(kind, d, waited, err)
		c.giveBack(d - waited)
		return err
	}
}

// waitAdmission waits d before an attempt may go: reserve, then wait.
func (c *call) waitAdmission(d time.Duration, kind WaitKind) error {
	return c.waitAdmissionOr(d, kind, nil)
}

// waitAdmissionOr is waitAdmission, ended early too when ready closes.
func (c *call) waitAdmissionOr(d time.Duration, kind WaitKind, ready <-chan struct{}) error {
	if d <= 0 {
		return nil
	}
	if err := c.reserve(d); err != nil {
		return err
	}
	return c.waitOr(d, kind, ready)
}

// waitUntil waits for ready, a wait of unknown length such as a turn for
// a concurrency slot, for as long as the budget, the context's deadline
// and until (when set) allow. The time waited is taken from the budget
// afterwards. expected, when known, is what the trace reports.
func (c *call) waitUntil(ready <-chan struct{}, until time.Time, kind WaitKind, expected time.Duration) error {
	limit := c.budgetLeft()
	if deadline, ok := c.ctx.Deadline(); ok {
		limit = min(limit, time.Until(deadline))
	}
	if !until.IsZero() {
		limit = min(limit, time.Until(until))
	}
	c.pre.stale()
	c.traceWait(kind, expected)
	start := time.Now()
	timer := time.NewTimer(max(limit, 0))
	defer timer.Stop()
	var err error
	select {
	case <-ready:
	case <-c.ctx.Done():
		err = c.ctx.Err()
	case <-timer.C:
		select {
		case <-ready: // handed over on the very instant the time ran out
		default:
			err = fmt.Errorf("a wait of more than %v does not fit: %w", limit, ErrBudgetExhausted)
		}
	}
	now := time.Now()
	c.waitEnded(kind, expected, now.Sub(start), err)
	c.spend(start, now)
	return err
}

// budgetLeft is what the call may still wait.
func (c *call) budgetLeft() time.Duration {
	if c.shared != nil {
		return c.shared.remaining()
	}
	return c.waitLeft
}

// spend pays for a wait of unknown length, from start to now, as much as
// is left.
func (c *call) spend(start, now time.Time) {
	if c.shared != nil {
		c.shared.spend(start, now)
	} else {
		c.waitLeft = max(c.waitLeft-now.Sub(start), 0)
	}
}

// giveBack returns the unused part of the last wait reserved, which ended
// early with d of it left.
func (c *call) giveBack(d time.Duration) {
	if d <= 0 {
		return
	}
	if c.shared != nil {
		c.shared.giveBack(time.Now(), c.paidUntil, c.paidCharge)
	} else {
		c.waitLeft += d
	}
}

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
