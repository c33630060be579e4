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

	"golang.org/x/time/rate"
)

func TestCooldownHoldsEveryRequestToTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "2"), answer(200))
		tr := New(s.mock())
		start := time.Now()
		var wg sync.WaitGroup
		var failed sync.Map
		for i := range 20 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 50 * time.Millisecond) // a steady stream
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
				if err != nil || resp.StatusCode != 200 {
					failed.Store(i, err)
					return
				}
				readAll(t, resp)
			})
		}
		wg.Wait()
		failed.Range(func(k, v any) bool { t.Errorf("caller %v did not succeed: %v", k, v); return true })

		at := s.offsets(start)
		if len(at) != 21 {
			t.Fatalf("server got %d requests, want 21: the refused one, its retry and 19 others", len(at))
		}
		if at[0] != 0 {
			t.Errorf("first request at %v, want 0", at[0])
		}
		for _, d := range at[1:] {
			if d < 2*time.Second || d > 2*time.Second+DefaultPauseSpread {
				t.Errorf("a request reached the server at %v, want within [2s, 2s+spread]", d)
			}
		}
		if distinct := len(slices.Compact(slices.Sorted(slices.Values(at[1:])))); distinct < 10 {
			t.Errorf("held requests were released at only %d distinct instants, want them spread", distinct)
		}
	})
}

func TestCooldownIsPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}))
		resp, _ := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		readAll(t, resp)
		other, _ := http.NewRequest(http.MethodGet, "https://other.example.com/", nil)
		start := time.Now()
		resp, err := tr.RoundTrip(other)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("another host waited %v, want 0", waited)
		}
		if blocked, d := tr.Blocking("api.example.com"); !blocked || d != 30*time.Second {
			t.Errorf("Blocking(api.example.com) = %v, %v; want true, 30s", blocked, d)
		}
		if blocked, _ := tr.Blocking("other.example.com"); blocked {
			t.Error("Blocking(other.example.com) = true, want false")
		}
	})
}

func TestCooldownOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithPause(PausePolicy{Off: true}), WithoutLearning())
		resp, _ := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		readAll(t, resp)
		start := time.Now()
		getN(t, tr, 1)
		if waited := time.Since(start); waited != 0 {
			t.Errorf("with the gate off, the next request waited %v, want 0", waited)
		}
	})
}

func TestCooldownLongerThanBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "600"), answer(200))
		tr := New(s.mock())
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("first call = %v, %v; want the 429 at once", resp, err)
		}
		readAll(t, resp)
		start := time.Now()
		resp, err = tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if resp != nil || !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("second call = %v, %v; want ErrBudgetExhausted: the 600s pause does not fit 2m", resp, err)
		}
		if time.Since(start) != 0 || s.calls() != 1 {
			t.Errorf("second call took %v and the server got %d requests; want 0 and 1", time.Since(start), s.calls())
		}
	})
}

func TestRefusedRetryReturnsLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{status: 429, header: http.Header{"Retry-After": {"1"}}, body: `{"error":"slow down"}`}, answer(200))
		// The retry needs a token the bucket will not have for a minute.
		tr := New(s.mock(), WithLimit(Limit{Rate: rate.Every(time.Minute), FailFast: true}))
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatalf("RoundTrip: %v, want the 429 it got", err)
		}
		if body := readAll(t, resp); resp.StatusCode != 429 || body != `{"error":"slow down"}` {
			t.Errorf("got %d %q, want the 429 with its body", resp.StatusCode, body)
		}
		if s.calls() != 1 {
			t.Errorf("server calls = %d, want 1", s.calls())
		}
	})
}

func TestCooldownWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "60"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}))
		resp, _ := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		readAll(t, resp)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		_, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if !errors.Is(err, context.Canceled) || time.Since(start) != 5*time.Second {
			t.Errorf("RoundTrip = %v after %v; want context.Canceled after 5s", err, time.Since(start))
		}
	})
}

func TestCooldownHoldsRequestsQueuedInAScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The first request's 429 comes back at 0.5s asking for 30s; the
		// others are already queued in the scope's pace by then.
		var mu sync.Mutex
		var sent []time.Duration
		start := time.Now()
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			first := len(sent) == 1
			mu.Unlock()
			if first {
				time.Sleep(500 * time.Millisecond)
				return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"30"}}, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := New(base, WithRetry(RetryPolicy{MaxAttempts: 1}), WithLimit(Limit{Rate: 1, Burst: 1}))
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
					_ = resp.Body.Close()
				}
			})
			time.Sleep(time.Millisecond)
		}
		wg.Wait()
		for _, at := range sent[1:] {
			if at < 30*time.Second {
				t.Fatalf("sent at %v: a request went during the pause set at 0.5s", sent)
			}
		}
	})
}

// A wait that fits neither the call's budget nor its context's deadline
// is refused by the tighter of the two: a pause of 600s, with 2m of budget
// and 10m before the deadline, is the budget's refusal; with 1m before
// the deadline, the deadline's.
func TestAWaitPastBothBoundsNamesTheTighter(t *testing.T) {
	for _, tc := range []struct {
		deadline time.Duration
		want     error
	}{
		{10 * time.Minute, ErrBudgetExhausted},
		{time.Minute, context.DeadlineExceeded},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := newScript(answer(429, "Retry-After", "600"), answer(200))
			tr := New(s.mock())
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			resp, err = tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if resp != nil || !errors.Is(err, tc.want) {
				t.Errorf("deadline %v: %v, %v; want %v", tc.deadline, resp, err, tc.want)
			}
			if tc.want == ErrBudgetExhausted && errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("deadline %v: %v names the deadline too, with 10m of it left", tc.deadline, err)
			}
		})
	}
}
