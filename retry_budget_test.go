package ratewise

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// failing answers 429 with Retry-After 0 to every request: each call
// would retry until MaxAttempts without a budget.
func failingHost() *script { return newScript(answer(429, "Retry-After", "0")) }

// getAll makes n calls to url through tr, each of which must end in a
// response.
func getAll(t *testing.T, tr *Transport, url string, n int) {
	t.Helper()
	for range n {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		readAll(t, resp)
	}
}

func TestRetryBudgetBoundsRetriesToAFailingHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		// A floor of 0.1 a second: the balance holds 1 + 0.2×100 = 21.
		p := RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond, RetryBudget: 0.2, RetryBudgetFloor: 0.1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		const calls = 200
		start := time.Now()
		for range calls {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			if resp.StatusCode != 429 {
				t.Fatalf("status = %d, want the last 429", resp.StatusCode)
			}
			readAll(t, resp)
		}
		elapsed := time.Since(start).Seconds()
		retries := s.calls() - calls
		// The full balance, a fifth of the calls, and the floor's trickle.
		most := 21 + 0.2*calls + 0.1*elapsed + 1
		if float64(retries) > most {
			t.Errorf("%d retries to a failing host, want at most %.0f (%d calls over %.1fs)", retries, most, calls, elapsed)
		}
		if retries < 21 {
			t.Errorf("%d retries, want at least the 21 a full balance holds", retries)
		}
		s.assertAllClosed(t)
	})
}

func TestRetryBudgetOffRetriesEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		p := RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond, RetryBudget: NoRetryBudget}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		getAll(t, tr, testURL, 50)
		if got := s.calls(); got != 50*5 {
			t.Errorf("server calls = %d, want every call's 5 attempts, 250", got)
		}
	})
}

func TestRetryBudgetRefillsFromTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		// The balance holds 1×10 + 0 = 10 retries and regains one a second.
		p := RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, RetryBudget: 1e-9, RetryBudgetFloor: 1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		getAll(t, tr, testURL, 20)
		if got := s.calls(); got != 20+10 {
			t.Fatalf("server calls = %d, want 20 calls and the 10 retries of a full balance", got)
		}
		time.Sleep(3 * time.Second)
		before := s.calls()
		getAll(t, tr, testURL, 5)
		if got := s.calls() - before; got != 5+3 {
			t.Errorf("after 3s, server calls = %d, want 5 calls and the 3 retries the floor paid in", got)
		}
	})
}

func TestRetryBudgetIsPerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		p := RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, RetryBudget: 1e-9, RetryBudgetFloor: 0.1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		getAll(t, tr, "https://a.example.com/", 5)
		if got := s.calls(); got != 5+1 {
			t.Fatalf("host a: server calls = %d, want 5 calls and the one retry its balance holds", got)
		}
		getAll(t, tr, "https://b.example.com/", 1)
		if got := s.calls(); got != 6+2 {
			t.Errorf("host b: server calls = %d, want its own full balance to retry once", got-6)
		}
	})
}

func TestRetryBudgetExhaustedAfterNetworkError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{err: errReset})
		p := RetryPolicy{InitialDelay: time.Millisecond, RetryBudget: 1e-9, RetryBudgetFloor: 0.1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
			t.Fatal("first call: no error")
		}
		_, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if !errors.Is(err, ErrRetryBudgetExhausted) || !errors.Is(err, errReset) {
			t.Errorf("second call: err = %v, want ErrRetryBudgetExhausted and the network error", err)
		}
		if got := s.calls(); got != 2+1 {
			t.Errorf("server calls = %d, want 2 then 1: the balance holds one retry", got)
		}
	})
}

func TestRetryBudgetGivenBackWhenRetryNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"))
		// A balance of 1 + 0.01: one retry. No cooldown, so that every call
		// sends its first attempt.
		p := RetryPolicy{MaxAttempts: 2, RetryBudget: 0.01, RetryBudgetFloor: 0.1}
		tr := New(s.mock(), WithRetry(p), WithPause(PausePolicy{Off: true}), WithoutLearning())
		for range 3 {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Second, cancel) // during the 30s backoff
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, testURL, nil)
			if _, err := tr.RoundTrip(req); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled during the backoff: err = %v, want context.Canceled", err)
			}
		}
		// The retries cancelled were never sent: the balance still has one.
		getAll(t, tr, testURL, 1)
		if got := s.calls(); got != 3+2 {
			t.Errorf("server calls = %d, want 3 cancelled calls and a last one with its retry", got)
		}
	})
}

// TestRetryBudgetGrowsWithFirstAttempts: every first attempt pays
// RetryBudget of a retry into its host's balance.
func TestRetryBudgetGrowsWithFirstAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		p := RetryPolicy{MaxAttempts: 5, InitialDelay: time.Millisecond, RetryBudget: 0.2, RetryBudgetFloor: 0.1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		getAll(t, tr, testURL, 200)
		if retries := s.calls() - 200; retries < 21+40-1 {
			t.Errorf("%d retries, want the 21 of a full balance and a fifth of 200 calls", retries)
		}
	})
}

// TestRetryBudgetRefillStopsAtItsCap: a long quiet spell saves no more
// retries than the balance's cap.
func TestRetryBudgetRefillStopsAtItsCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := failingHost()
		p := RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, RetryBudget: 1e-9, RetryBudgetFloor: 1}
		tr := New(s.mock(), WithRetry(p), WithoutLearning())
		getAll(t, tr, testURL, 20) // balance spent
		time.Sleep(time.Second / 2)
		getAll(t, tr, testURL, 1) // keep the balance alive (not evicted)
		time.Sleep(time.Minute)
		before := s.calls()
		getAll(t, tr, testURL, 30)
		if got := s.calls() - before - 30; got > 10 {
			t.Errorf("%d retries after a minute, want at most the cap of 10", got)
		}
	})
}

// TestPacedRetriesSpendNoRetryBudget: a retry of a refusal whose wait
// hint it waits out goes when the server said it may, adding nothing to
// what the server lets through: it takes nothing from the retry budget,
// which an empty balance shows. A transient error's retry, with no hint,
// still takes from it.
func TestPacedRetriesSpendNoRetryBudget(t *testing.T) {
	alternate := func(first step, n int) []step {
		var steps []step
		for range n {
			steps = append(steps, first, answer(200))
		}
		return steps
	}
	// A balance of next to nothing: no share, no floor to speak of.
	p := RetryPolicy{MaxAttempts: 2, InitialDelay: time.Millisecond, RetryBudget: 1e-9, RetryBudgetFloor: 1e-9}
	synctest.Test(t, func(t *testing.T) {
		s := newScript(alternate(answer(429, "Retry-After", "1"), 20)...)
		getAll(t, New(s.mock(), WithRetry(p), WithoutLearning()), testURL, 20)
		if got := s.calls(); got != 40 {
			t.Errorf("hinted refusals: server calls = %d, want each of the 20 calls refused, then retried after its hint", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		s := newScript(alternate(answer(503), 20)...)
		getAll(t, New(s.mock(), WithRetry(p), WithoutLearning()), testURL, 20)
		if got := s.calls(); got >= 30 {
			t.Errorf("bare 503s: server calls = %d, want the retries bounded by the empty balance", got)
		}
	})
}
