package redis

import (
	"context"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// TakeWindow answers as the MemoryStore, the reference, does: three
// starts of a window of three go at once; a fourth that must not wait is
// refused with the wait until the oldest leaves the window, taking
// nothing; one that may wait is reserved for then; the next after it; and
// once the window has passed, starts go at once again.
func TestTakeWindowAnswersAsTheReference(t *testing.T) {
	srv := redistest.Start(t)
	rs, client := newStore(t, srv, Options{Prefix: "window:"})
	ctx := context.Background()
	const window = 300 * time.Millisecond
	// A wait is counted from the window's first start: it is shorter by the
	// time that passed since, which a loaded machine stretches.
	var began time.Time
	near := func(got, want time.Duration) bool {
		return got <= want+5*time.Millisecond && got > want-time.Since(began)-5*time.Millisecond
	}
	for _, s := range []struct {
		name  string
		store store.Windows
	}{{"memory", ratewise.NewMemoryStore()}, {"redis", rs}} {
		began = time.Now()
		for i := range 3 {
			if wait, err := s.store.TakeWindow(ctx, "k", 3, window, 0); err != nil || wait != 0 {
				t.Fatalf("%s, start %d of 3: %v, %v; want now", s.name, i+1, wait, err)
			}
		}
		refused, err := s.store.TakeWindow(ctx, "k", 3, window, 0)
		if err != nil || !near(refused, window) {
			t.Fatalf("%s, a fourth that must not wait: %v, %v; want about the window, %v", s.name, refused, err, window)
		}
		asked := time.Now()
		reserved, _ := s.store.TakeWindow(ctx, "k", 3, window, time.Second)
		if !near(reserved, window) {
			t.Fatalf("%s, a fourth that may wait: %v, want it reserved about %v on", s.name, reserved, window)
		}
		next, _ := s.store.TakeWindow(ctx, "k", 3, window, time.Second)
		// Waits are from when each was asked: the fifth's start, however
		// late the machine asked it, is not before the fourth's.
		if time.Now().Add(next).Before(asked.Add(reserved)) || !near(next, window) {
			t.Fatalf("%s, a fifth: %v, want it at the fourth's (%v) or after", s.name, next, reserved)
		}
		time.Sleep(2*window + 50*time.Millisecond) // the reserved starts leave the window too
		if wait, _ := s.store.TakeWindow(ctx, "k", 3, window, 0); wait != 0 {
			t.Errorf("%s, once the window passed: %v, want now", s.name, wait)
		}
	}
	assertAllExpire(t, client, "window:*")
}
