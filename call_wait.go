package ratewise

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Every wait of a call (a retry's backoff, a cooldown, a pace, a breaker's
// reset, a concurrency slot) goes through the functions below: bounded by
// the call's waitBudget (its own TotalWaitCap, or a sharedBudget that
// calls share through WithBudget, and its context's deadline), ended at
// once by its context, and counted in its stats.

// pastDeadlineError is a wait refused because it would last until the
// context's deadline. It matches context.DeadlineExceeded, the deadline's
// own error, but tells itself apart from a network timeout, which matches
// it too.
type pastDeadlineError struct{ wait time.Duration }

func (e pastDeadlineError) Error() string {
	return fmt.Sprintf("a wait of %v would reach the context deadline: %v", e.wait, context.DeadlineExceeded)
}

func (e pastDeadlineError) Is(target error) bool { return target == context.DeadlineExceeded }

// waitBudget bounds a call's waits: its own TotalWaitCap, or a budget
// calls share (WithBudget), and its context's deadline. Every wait the
// call starts is reserved from it, or bounded by what it has left, and
// what a wait cut short did not use goes back to it. The call embeds it.
type waitBudget struct {
	ctx    context.Context
	shared *sharedBudget // nil: own is the call's
	own    time.Duration // what is left of the call's own budget
	// paidUntil and paidCharge are the last wait reserved from shared,
	// for giving back what it did not use.
	paidUntil  time.Time
	paidCharge time.Duration
}

// reserve takes a wait of d from the budget. It refuses, taking
// nothing, a wait that does not fit in the budget left (ErrBudgetExhausted)
// or that would last until the context's deadline, leaving no time to send
// (context.DeadlineExceeded); one that fits neither, with the error of the
// tighter bound.
func (w *waitBudget) reserve(d time.Duration) error {
	d = max(d, 0)
	if deadline, ok := w.ctx.Deadline(); ok {
		// A wait that fits neither is refused by the tighter of the two:
		// with seconds left before its deadline, a call that gives up on a
		// smaller budget gave up on its budget.
		if left := time.Until(deadline); left <= d && w.budgetLeft() >= left {
			return pastDeadlineError{d}
		}
	}
	if w.shared != nil {
		now := time.Now()
		charged, ok := w.shared.take(now, d)
		if !ok {
			return fmt.Errorf("a wait of %v does not fit: %w", d, ErrBudgetExhausted)
		}
		w.paidUntil, w.paidCharge = now.Add(d), charged
		return nil
	}
	if d > w.own {
		return fmt.Errorf("a wait of %v does not fit: %w", d, ErrBudgetExhausted)
	}
	w.own -= d
	return nil
}

// longest is the longest a wait of unknown length may last: what the
// budget has left, the context's deadline, and until when set.
func (w *waitBudget) longest(until time.Time) time.Duration {
	limit := w.budgetLeft()
	if deadline, ok := w.ctx.Deadline(); ok {
		limit = min(limit, time.Until(deadline))
	}
	if !until.IsZero() {
		limit = min(limit, time.Until(until))
	}
	return max(limit, 0)
}

// budgetLeft is what the call may still wait.
func (w *waitBudget) budgetLeft() time.Duration {
	if w.shared != nil {
		return w.shared.remaining()
	}
	return w.own
}

// spend pays for a wait of unknown length, from start to now, as much as
// is left.
func (w *waitBudget) spend(start, now time.Time) {
	if w.shared != nil {
		w.shared.spend(start, now)
	} else {
		w.own = max(w.own-now.Sub(start), 0)
	}
}

// giveBack returns the unused part of the last wait reserved, which ended
// early with d of it left.
func (w *waitBudget) giveBack(d time.Duration) {
	if d <= 0 {
		return
	}
	if w.shared != nil {
		w.shared.giveBack(time.Now(), w.paidUntil, w.paidCharge)
	} else {
		w.own += d
	}
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
	c.pre.Stale()
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
	limit := c.longest(until)
	c.pre.Stale()
	c.traceWait(kind, expected)
	start := time.Now()
	timer := time.NewTimer(limit)
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

// sharedBudget is a wait budget shared by calls. It is spent by the time during
// which at least one of them waits: waits that overlap are paid for once,
// so that two calls waiting out the same 30 seconds spend 30 seconds of
// it, as a person watching them would count. A wait of known length is
// paid for before it starts, so that concurrent calls never overspend the
// budget together; a wait for a concurrency slot, of unknown length, is
// bounded by what is left when it starts and paid for when it ends.
type sharedBudget struct {
	mu      sync.Mutex
	left    time.Duration // guarded by mu
	covered time.Time     // the end of the furthest wait paid for; guarded by mu
}

func newSharedBudget(d time.Duration) *sharedBudget {
	return &sharedBudget{left: max(d, 0)}
}

// take pays for a wait of d starting at now: the part of it that no wait
// already paid for covers. It returns what it charged, or false, charging
// nothing, when that does not fit.
func (b *sharedBudget) take(now time.Time, d time.Duration) (time.Duration, bool) {
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
func (b *sharedBudget) giveBack(now, end time.Time, charged time.Duration) {
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
func (b *sharedBudget) spend(start, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left = max(b.left-max(now.Sub(laterOf(start, b.covered)), 0), 0)
	b.covered = laterOf(b.covered, now)
}

// remaining is what is left to wait.
func (b *sharedBudget) remaining() time.Duration {
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

// context is the call's context.
func (c *call) context() context.Context { return c.ctx }
