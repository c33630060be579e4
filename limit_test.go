package ratewise

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// getN sends n GETs one after the other through tr and fails t on an
// error or a status other than 200.
func getN(t *testing.T, tr http.RoundTripper, n int) {
	t.Helper()
	for i := range n {
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if readAll(t, resp); resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
}

func TestRatePacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		start := time.Now()
		getN(t, New(s.mock(), WithLimit(Limit{Rate: 10, Burst: 1})), 100)
		got := s.offsets(start)
		for i, at := range got {
			if want := time.Duration(i) * 100 * time.Millisecond; at != want {
				t.Fatalf("request %d sent at %v, want %v", i, at, want)
			}
		}
		if last := got[len(got)-1]; last != 9900*time.Millisecond {
			t.Errorf("last request at %v, want exactly 9.9s", last)
		}
	})
}

func TestMinSpacingWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		start := time.Now()
		getN(t, New(s.mock(), WithLimit(Limit{MinSpacing: 2 * time.Second, SpacingJitter: 0.2})), 100)
		at := s.offsets(start)
		if at[0] != 0 {
			t.Errorf("first request at %v, want at once", at[0])
		}
		var sum, sumSq float64
		for i := 1; i < len(at); i++ {
			gap := at[i] - at[i-1]
			if gap < 1600*time.Millisecond || gap > 2400*time.Millisecond {
				t.Fatalf("gap %d = %v, want within [1.6s, 2.4s]", i, gap)
			}
			sum += gap.Seconds()
			sumSq += gap.Seconds() * gap.Seconds()
		}
		n := float64(len(at) - 1)
		if sd := math.Sqrt(sumSq/n - (sum/n)*(sum/n)); sd < 0.05 {
			t.Errorf("gaps' standard deviation = %.3fs, want them spread", sd)
		}
	})
}

func TestFailFastSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "per-host", Rate: rate.Every(4 * time.Second), FailFast: true}))
		getN(t, tr, 1)
		time.Sleep(time.Second)
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, strings.NewReader("body")))
		var le *ClientLimitError
		if resp != nil || !errors.As(err, &le) || !errors.Is(err, ErrLimited) {
			t.Fatalf("RoundTrip = %v, %v; want a *ClientLimitError", resp, err)
		}
		if le.Reason != "fail-fast" || le.RetryIn != 3*time.Second || le.Scope != "per-host" || le.Key != "api.example.com" {
			t.Errorf("ClientLimitError = %+v, want fail-fast, RetryIn 3s, per-host, api.example.com", *le)
		}
		if s.calls() != 1 {
			t.Errorf("server calls = %d, want 1: nothing sent for the refused request", s.calls())
		}
		// The refused request took no token: a request 3s later goes at once.
		time.Sleep(3 * time.Second)
		getN(t, tr, 1)
	})
}

func TestMaxWaitAndMaxQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Rate: 1, MaxWait: 1500 * time.Millisecond}))
		getN(t, tr, 2) // the second waits 1s, within MaxWait
		getN(t, tr, 1)
		var le *ClientLimitError
		// Two more at once: the first waits 1s, the second would wait 2s.
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for range 2 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
				if err == nil {
					readAll(t, resp)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		refused := 0
		for err := range errs {
			if errors.As(err, &le) && le.Reason == "max-wait" && le.RetryIn == 2*time.Second {
				refused++
			} else if err != nil {
				t.Errorf("unexpected error %v", err)
			}
		}
		if refused != 1 {
			t.Errorf("%d requests refused for max-wait, want 1", refused)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{}
		tr := New(base, WithLimit(Limit{MaxConcurrent: 1, MaxQueue: 2}))
		results := make(chan error, 4)
		for range 4 {
			go func() {
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
				if err == nil {
					_ = resp.Body.Close()
				}
				results <- err
			}()
		}
		var refused int
		for range 4 {
			var le *ClientLimitError
			if err := <-results; errors.As(err, &le) && le.Reason == "max-queue" {
				refused++
			} else if err != nil {
				t.Errorf("unexpected error %v", err)
			}
		}
		if refused != 1 || base.calls.Load() != 3 {
			t.Errorf("refused %d, sent %d; want 1 refused for max-queue and 3 sent", refused, base.calls.Load())
		}
	})
}

func TestReserveLeftForHigherPriorities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Rate: rate.Every(time.Minute), Burst: 5, Reserve: 2, FailFast: true}))
		send := func(p Priority) error {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(WithPriority(context.Background(), p)))
			if err == nil {
				readAll(t, resp)
			}
			return err
		}
		for i := range 3 {
			if err := send(PriorityLow); err != nil {
				t.Fatalf("low-priority request %d: %v", i, err)
			}
		}
		if err := send(PriorityLow); !errors.Is(err, ErrLimited) {
			t.Fatalf("fourth low-priority request: err = %v, want ErrLimited: 2 tokens are reserved", err)
		}
		for i := range 2 {
			if err := send(PriorityNormal + Priority(i)); err != nil {
				t.Fatalf("reserved token %d for a higher priority: %v", i, err)
			}
		}
		if err := send(PriorityHigh); !errors.Is(err, ErrLimited) {
			t.Fatalf("sixth request: err = %v, want ErrLimited: the bucket is empty", err)
		}
		if st := tr.KeyStatus("api.example.com").Scopes[0]; st.Tokens >= 1 {
			t.Errorf("tokens left = %v, want under 1", st.Tokens)
		}
	})
}

func TestLowPriorityWaitsForTokensAboveReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Rate: 1, Burst: 3, Reserve: 2}))
		ctx := WithPriority(context.Background(), PriorityLow)
		start := time.Now()
		for range 2 {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		// The first goes at once (3 tokens); the second waits for the third
		// token to come back, 1s.
		if got, want := s.offsets(start), []time.Duration{0, time.Second}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("low-priority requests sent at %v, want %v", got, want)
		}
	})
}

func TestScopesStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		// 3 a minute per host, and 2 per 10s overall: both must pass.
		tr := New(s.mock(),
			WithLimit(Limit{Name: "minute", Rate: rate.Every(20 * time.Second), Burst: 3}),
			WithLimit(Limit{Name: "global", Rate: rate.Every(5 * time.Second), Burst: 2, Key: Global}))
		start := time.Now()
		getN(t, tr, 4)
		want := []time.Duration{0, 0, 5 * time.Second, 20 * time.Second}
		if got := s.offsets(start); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sent at %v, want %v", got, want)
		}
		st := tr.KeyStatus("api.example.com")
		if len(st.Scopes) != 3 || st.Scopes[1].Key != "" || st.Scopes[0].Name != "minute" || st.Scopes[0].Burst != 3 || st.Scopes[2].Name != LearnedScope {
			t.Errorf("KeyStatus scopes = %+v", st.Scopes)
		}
	})
}

func TestIdleKeysEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		byPath := func(r *http.Request) string { return r.URL.Path }
		tr := New(base, WithLimit(Limit{Rate: 100, Burst: 1, Key: byPath, MaxConcurrent: 10}))
		s := tr.scopes()[0]
		req := mustRequest(t, http.MethodGet, nil)
		// 20,000 keys, some 300 a shard of the map: the sweeps walk every
		// shard whatever the count, which only scales their work.
		const keys = 20_000
		for i := range keys {
			r := req.Clone(req.Context())
			r.URL.Path = fmt.Sprintf("/items/%d", i)
			resp, err := tr.RoundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		if n := s.Len(); n < keys/2 {
			t.Fatalf("%d keys held right after the run, want most of the %d (not yet idle)", n, keys)
		}
		// Traffic goes on for other keys: the sweeps it brings evict the
		// idle ones once they have been idle for the idle timeout.
		for i := range 3 {
			time.Sleep(DefaultIdleTimeout / 2)
			r := req.Clone(req.Context())
			r.URL.Path = fmt.Sprintf("/later/%d", i)
			resp, err := tr.RoundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		if n := s.Len(); n > 3 {
			t.Errorf("%d keys held after the idle period, want at most the 3 used since", n)
		}
	})
}

func TestLimitValidate(t *testing.T) {
	tests := []struct {
		give Limit
		want string // substring; "" means valid
	}{
		{give: Limit{}},
		{give: Limit{Rate: 10, Burst: 5, Reserve: 4}},
		{give: Limit{Rate: -1}, want: "Rate (-1)"},
		{give: Limit{Burst: -1}, want: "Burst (-1)"},
		{give: Limit{Rate: 1, MinSpacing: time.Second}, want: "both Rate"},
		{give: Limit{MinSpacing: time.Second, SpacingJitter: 1}, want: "SpacingJitter (1)"},
		{give: Limit{MaxConcurrent: -1}, want: "MaxConcurrent (-1)"},
		{give: Limit{MaxWait: -1}, want: "MaxWait (-1ns)"},
		{give: Limit{MaxQueue: -1}, want: "MaxQueue (-1)"},
		{give: Limit{Reserve: 1}, want: "needs a finite Rate"},
		{give: Limit{Rate: 1, Burst: 2, Reserve: 2}, want: "below Burst (2)"},
		{give: Limit{Adaptive: true, Rate: 50, StartRate: 10}},
		{give: Limit{Adaptive: true, MinSpacing: time.Second}, want: "no MinSpacing (1s)"},
		{give: Limit{Adaptive: true, Rate: 10, Burst: 5, Reserve: 1}, want: "or Reserve (1)"},
		{give: Limit{StartRate: 5}, want: "StartRate (5) needs Adaptive"},
		{give: Limit{Adaptive: true, StartRate: -1}, want: "StartRate (-1)"},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.give, err, tt.want)
		}
	}
	if _, err := New(nil, WithLimit(Limit{Rate: -1})).RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
		t.Error("RoundTrip with an invalid Limit returned no error")
	}
}

func TestByHeaderHidesTheValue(t *testing.T) {
	req := mustRequest(t, http.MethodGet, nil)
	req.Header.Set("Apikey", "secret-123")
	key := ByHeader("Apikey")(req)
	if strings.Contains(key, "secret") || !strings.HasPrefix(key, "Apikey:") {
		t.Errorf("ByHeader key = %q, want a hash of the value", key)
	}
	other := mustRequest(t, http.MethodGet, nil)
	other.Header.Set("Apikey", "secret-456")
	if ByHeader("Apikey")(other) == key {
		t.Error("two API keys share a ByHeader key")
	}
}
