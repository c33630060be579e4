package ratewise

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestSetRetryPolicyReachesCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 10}))
		done := make(chan int)
		go func() {
			status, _ := callOnce(t, tr, context.Background())
			done <- status
		}()
		time.Sleep(1500 * time.Millisecond) // two attempts made
		if err := tr.SetRetryPolicy(RetryPolicy{MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		if status := <-done; status != 429 || s.calls() != 3 {
			t.Errorf("call ended %d after %d attempts, want the new policy's 3", status, s.calls())
		}
		if got := tr.RetryPolicy(); got.MaxAttempts != 3 || got.InitialDelay != DefaultInitialDelay {
			t.Errorf("RetryPolicy() = %+v, want MaxAttempts 3 with defaults", got)
		}
		if err := tr.SetRetryPolicy(RetryPolicy{MaxAttempts: -1}); err == nil || !strings.Contains(err.Error(), "MaxAttempts (-1)") {
			t.Errorf("invalid policy: err = %v", err)
		}
		if got := tr.RetryPolicy().MaxAttempts; got != 3 {
			t.Errorf("an invalid policy changed MaxAttempts to %d", got)
		}
	})
}

func TestSetRetryPolicyLeavesAContextsPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		tr := New(s.mock())
		done := goCallOnce(t, tr, WithRetryPolicy(context.Background(), RetryPolicy{MaxAttempts: 4}))
		time.Sleep(500 * time.Millisecond)
		_ = tr.SetRetryPolicy(RetryPolicy{MaxAttempts: 1})
		<-done
		if s.calls() != 4 {
			t.Errorf("%d attempts, want the context's 4", s.calls())
		}
	})
}

func TestSetLimitChangesTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "api", Rate: 10, Burst: 1}))
		get := func() {
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for range 3 {
			get()
		}
		if took := time.Since(start); took != 200*time.Millisecond {
			t.Fatalf("3 calls at 10/s took %v, want 200ms", took)
		}
		if err := tr.SetLimit(Limit{Name: "api", Rate: 1, Burst: 1}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		for range 3 {
			get()
		}
		// The bucket had no token left: the first waits a whole second now.
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("3 calls at 1/s took %v, want 3s", took)
		}
		if got := tr.Limits()[0]; got.Rate != 1 || got.Name != "api" {
			t.Errorf("Limits() = %+v", got)
		}
		if st := tr.KeyStatus(host).Scopes[0]; st.Rate != 1 {
			t.Errorf("status rate = %v, want 1", st.Rate)
		}
	})
}

func TestSetLimitRaisedConcurrencyLetsWaitersThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{MaxConcurrent: 1}))
		first, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)) // holds the slot while its body is open
		if err != nil {
			t.Fatal(err)
		}
		done := goCallOnce(t, tr, context.Background())
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the second call did not wait for the only slot")
		default:
		}
		if err := tr.SetLimit(Limit{Name: "limit 1", MaxConcurrent: 2}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("a raised MaxConcurrent left the waiting call waiting")
		}
		readAll(t, first)
	})
}

func TestSetLimitLoweredConcurrencyTakesSlotsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "api", MaxConcurrent: 2}))
		var open []*http.Response
		for range 2 {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, resp)
		}
		if err := tr.SetLimit(Limit{Name: "api", MaxConcurrent: 1}); err != nil {
			t.Fatal(err)
		}
		done := goCallOnce(t, tr, context.Background())
		readAll(t, open[0]) // one slot frees, but two were taken under a cap of one now
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("a call went while the lowered cap was still full")
		default:
		}
		readAll(t, open[1])
		<-done
	})
}

func TestSetLimitRefusals(t *testing.T) {
	tr := New(nil, WithLimit(Limit{Name: "api", Rate: 1}), WithLimit(Limit{Name: "learned", Adaptive: true}))
	for _, tt := range []struct {
		give Limit
		want string
	}{
		{Limit{Name: "nope", Rate: 1}, `no limit scope is named "nope"`},
		{Limit{Name: "api", Rate: -1}, "Rate (-1)"},
		{Limit{Name: "api", Rate: 1, Adaptive: true}, "Adaptive (false to true)"},
		{Limit{Name: "api", Rate: 1, IdleTimeout: time.Minute}, "IdleTimeout"},
	} {
		if err := tr.SetLimit(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("SetLimit(%+v) = %v, want %q", tt.give, err, tt.want)
		}
	}
	if got := tr.Limits()[0].Rate; got != 1 {
		t.Errorf("a refused SetLimit changed the rate to %v", got)
	}
	if err := tr.SetLimit(Limit{Name: "learned", Adaptive: true, Rate: 5}); err != nil {
		t.Errorf("a ceiling for the adaptive scope: %v", err)
	}
}

func TestSetLimitChangesAnAdaptiveCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(1000, 1000, 0, false)
		rec := &recording{base: srv}
		tr := New(rec, WithLimit(Limit{Name: "api", Adaptive: true, Rate: 100}))
		if _, failed := goodput(tr, 10, 50); failed != 0 {
			t.Fatal(failed)
		}
		if err := tr.SetLimit(Limit{Name: "api", Adaptive: true, Rate: 5}); err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		rec.times = nil
		rec.mu.Unlock()
		if _, failed := goodput(tr, 10, 20); failed != 0 {
			t.Fatal(failed)
		}
		if got := maxInAnySecond(rec.times); got > 5 {
			t.Errorf("%d requests in a second under a ceiling lowered to 5", got)
		}
	})
}

func TestSetLimitUnderTrafficHasNoRace(t *testing.T) {
	tr := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	}), WithLimit(Limit{Name: "a", Rate: 1e6, Burst: 100, MaxConcurrent: 50}))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
				if err == nil {
					_ = resp.Body.Close()
				}
			}
		})
	}
	// Flip between a bucket and none, and the cap between two sizes.
	for i := range 500 {
		r := rate.Limit(0)
		if i%2 == 0 {
			r = 1e6
		}
		if err := tr.SetLimit(Limit{Name: "a", Rate: r, Burst: 100, MaxConcurrent: 50 + i%2}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
