package learn

import (
	"testing"
	"time"
)

// TestWindowCountsAnswersThatCameAfterItsRefusal: answers race. A window
// that let 50 through may have one of them answered after the refusal
// that closed it, which counted 49: that success is the window's too,
// and the quota it teaches is 50, not 49 for good. Requests sent before
// the window opened, or after it closed, are not its.
func TestWindowCountsAnswersThatCameAfterItsRefusal(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &learnedWindow{quota: 49, confirmed: true, openSeq: 100, windowTurns: windowTurns{opens: t0.Add(time.Second)}}
	const closedAt = 160
	w.succeeded(150, closedAt) // sent in the window, answered after its refusal
	if w.quota != 50 {
		t.Fatalf("quota %d after a success of the window answered late; want 50", w.quota)
	}
	w.succeeded(90, closedAt)  // sent before the window opened
	w.succeeded(170, closedAt) // sent after it closed
	if w.quota != 50 || w.used != 0 {
		t.Fatalf("quota %d, used %d after successes of other windows; want 50 and 0", w.quota, w.used)
	}
	w.opens = time.Time{} // reopened
	w.succeeded(180, closedAt)
	if w.used != 1 || w.quota != 50 {
		t.Fatalf("an open window counted used %d, quota %d; want 1 and 50", w.used, w.quota)
	}
}
