package ratewise

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestBudgetPaysOverlappingWaitsOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := newSharedBudget(100 * time.Second)
	steps := []struct {
		name     string
		now      int
		d        int
		wantOK   bool
		wantPaid int
		wantLeft int
	}{
		{"a 60s wait", 0, 60, true, 60, 40},
		{"a 60s wait alongside it: only 10s are new", 10, 60, true, 10, 30},
		{"a 20s wait inside them: free", 20, 20, true, 0, 30},
		{"after them, 40s do not fit in 30s", 80, 40, false, 0, 30},
		{"after them, 30s do", 80, 30, true, 30, 0},
	}
	for _, s := range steps {
		paid, ok := b.take(at(s.now), time.Duration(s.d)*time.Second)
		if ok != s.wantOK || paid != time.Duration(s.wantPaid)*time.Second || b.remaining() != time.Duration(s.wantLeft)*time.Second {
			t.Errorf("%s: take = %v, %v, left %v; want %ds, %v, left %ds", s.name, paid, ok, b.remaining(), s.wantPaid, s.wantOK, s.wantLeft)
		}
	}
}

func TestBudgetGiveBackAndSpend(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newSharedBudget(time.Minute)
	paid, _ := b.take(t0, 30*time.Second)
	b.giveBack(t0.Add(10*time.Second), t0.Add(30*time.Second), paid) // cut short after 10s
	if got := b.remaining(); got != 50*time.Second {
		t.Errorf("after a 30s wait cut at 10s: %v left, want 50s", got)
	}
	// A wait that another covers beyond gives nothing back.
	b = newSharedBudget(time.Minute)
	p1, _ := b.take(t0, 10*time.Second)
	_, _ = b.take(t0, 20*time.Second)
	b.giveBack(t0.Add(5*time.Second), t0.Add(10*time.Second), p1)
	if got := b.remaining(); got != 40*time.Second {
		t.Errorf("giving back a wait covered by a longer one: %v left, want 40s", got)
	}
	// A slot wait is paid afterwards, for what nothing else covered.
	b = newSharedBudget(time.Minute)
	_, _ = b.take(t0, 10*time.Second)
	b.spend(t0.Add(5*time.Second), t0.Add(25*time.Second))
	if got := b.remaining(); got != 35*time.Second {
		t.Errorf("a slot wait from 5s to 25s over a paid wait to 10s: %v left, want 35s", got)
	}
	b.spend(t0, t0.Add(time.Hour))
	if got := b.remaining(); got != 0 {
		t.Errorf("overspent: %v left, want 0", got)
	}
}

func TestSharedBudgetCountsTimeNotSums(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two calls each told to wait 60s at the same moment, under a 100s
		// budget: they wait together, 60s of it, and both get through.
		s := newScript(answer(429, "Retry-After", "60"), answer(429, "Retry-After", "60"), answer(200))
		tr := New(s.mock(), WithPause(PausePolicy{Off: true}), WithoutLearning())
		ctx := WithBudget(context.Background(), 100*time.Second)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if status, err := callOnce(t, tr, ctx); status != 200 {
					t.Errorf("call = %d, %v; want 200", status, err)
				}
			})
		}
		wg.Wait()
		if left, _ := BudgetLeft(ctx); left != 40*time.Second {
			t.Errorf("budget left = %v, want 40s: the two waits overlapped", left)
		}
	})
}
