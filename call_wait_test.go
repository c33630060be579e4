package ratewise

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests a call's waits: the total wait cap, a wait budget shared
// by calls, and cancellation during a wait.

func TestTotalWaitCapStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		p := RetryPolicy{MaxAttempts: 100, InitialDelay: time.Second, MaxDelay: 10 * time.Second,
			Jitter: JitterNone, TotalWaitCap: 25 * time.Second}
		r := s.get(t, context.Background(), p)
		// Waits 1+2+4+8+10 = 25s fit the cap exactly; the next 10s does not.
		if r.elapsed != 25*time.Second || r.stats.Attempts() != 6 || r.stats.Waited() != 25*time.Second {
			t.Errorf("elapsed %v, attempts %d, waited %v; want 25s, 6, 25s", r.elapsed, r.stats.Attempts(), r.stats.Waited())
		}
	})
}

func TestTotalWaitCapNeverExceededWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 20 * time.Second
		p := RetryPolicy{MaxAttempts: 50, InitialDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second, TotalWaitCap: limit}
		tr := New(nil, WithRetry(p), WithoutLearning()) // the retry layer's waits alone
		for i := range 200 {
			s := newScript(answer(429), answer(429, "Retry-After", "3"), answer(503, "Retry-After", "1"))
			tr.base = s.mock()
			ctx, stats := WithCallStats(context.Background())
			start := time.Now()
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if err != nil {
				t.Fatalf("run %d: RoundTrip: %v", i, err)
			}
			readAll(t, resp)
			if elapsed := time.Since(start); elapsed > limit || stats.Waited() > limit {
				t.Fatalf("run %d: elapsed %v, waited %v; cap is %v", i, elapsed, stats.Waited(), limit)
			}
			if stats.Attempts() < 2 {
				t.Fatalf("run %d: attempts = %d, want retries inside the cap", i, stats.Attempts())
			}
		}
	})
}

func TestSharedBudgetAcrossConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(429, "Retry-After", "30"), answer(200))
		// Without the pause gate or a learned window, which would hold
		// the second call.
		tr := New(s.mock(), WithPause(PausePolicy{Off: true}), WithoutLearning())
		ctx := WithBudget(context.Background(), 40*time.Second)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range statuses {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Second) // the second call comes 20s later
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
				if err != nil {
					t.Errorf("RoundTrip: %v", err)
					return
				}
				readAll(t, resp)
				statuses[i] = resp.StatusCode
			})
		}
		wg.Wait()
		slices.Sort(statuses)
		// Both got a 429 asking for 30s: the first waits 0-30s, the second
		// would wait 20-50s, 20s more than the 10s the budget has left.
		if !slices.Equal(statuses, []int{200, 429}) {
			t.Errorf("statuses = %v, want one 200 and one 429", statuses)
		}
		if left, ok := BudgetLeft(ctx); !ok || left != 10*time.Second {
			t.Errorf("BudgetLeft = %v, %v; want 10s, true", left, ok)
		}
	})
}

func TestCancelDuringWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Second, cancel)
		start := time.Now()
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if resp != nil {
			t.Errorf("resp = %v, want nil with an error", resp.Status)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("returned after %v, want at the cancel, 10s", got)
		}
		s.assertAllClosed(t)
	})
}

func TestCancelGivesBackSharedBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"))
		budgetCtx := WithBudget(context.Background(), time.Minute)
		ctx, cancel := context.WithTimeoutCause(budgetCtx, 40*time.Second, errors.New("unused"))
		defer cancel()
		time.AfterFunc(10*time.Second, cancel)
		_, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if left, _ := BudgetLeft(budgetCtx); left != 50*time.Second {
			t.Errorf("budget left = %v, want 50s: 10s spent, 20s given back", left)
		}
	})
}
