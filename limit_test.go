package ratewise

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/keyed"
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

// slowBase answers after a second of (fake) time and records the most
// requests it had in flight at once.
type slowBase struct {
	inFlight, most atomic.Int32
	calls          atomic.Int32
}

func (b *slowBase) RoundTrip(*http.Request) (*http.Response, error) {
	b.calls.Add(1)
	n := b.inFlight.Add(1)
	for {
		m := b.most.Load()
		if n <= m || b.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(time.Second)
	b.inFlight.Add(-1)
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestMaxConcurrentNeverExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{}
		tr := New(base, WithLimit(Limit{MaxConcurrent: 3}))
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
				if err != nil {
					t.Errorf("RoundTrip: %v", err)
					return
				}
				_ = resp.Body.Close()
			})
		}
		wg.Wait()
		if most := base.most.Load(); most != 3 {
			t.Errorf("most requests in flight = %d, want 3", most)
		}
		if st := tr.LimitStatus("api.example.com").Scopes[0]; st.InFlight != 0 || st.Waiting != 0 {
			t.Errorf("after the run: %d in flight, %d waiting; want 0, 0", st.InFlight, st.Waiting)
		}
	})
}

func TestSlotHeldUntilBodyClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{status: 200, body: "payload"})
		tr := New(s.mock(), WithLimit(Limit{MaxConcurrent: 1, FailFast: true}))
		first, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)); !errors.Is(err, ErrLimited) {
			t.Fatalf("second request while the first body is open: err = %v, want ErrLimited", err)
		}
		if body := readAll(t, first); body != "payload" {
			t.Fatalf("body = %q", body)
		}
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatalf("after the body was closed: %v", err)
		}
		readAll(t, resp)
	})
}

func TestFailFastSendsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "per-host", Rate: rate.Every(4 * time.Second), FailFast: true}))
		getN(t, tr, 1)
		time.Sleep(time.Second)
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, strings.NewReader("body")))
		var le *LimitError
		if resp != nil || !errors.As(err, &le) || !errors.Is(err, ErrLimited) {
			t.Fatalf("RoundTrip = %v, %v; want a *LimitError", resp, err)
		}
		if le.Reason != "fail-fast" || le.RetryIn != 3*time.Second || le.Scope != "per-host" || le.Key != "api.example.com" {
			t.Errorf("LimitError = %+v, want fail-fast, RetryIn 3s, per-host, api.example.com", *le)
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
		var le *LimitError
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
			var le *LimitError
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
		if st := tr.LimitStatus("api.example.com").Scopes[0]; st.Tokens >= 1 {
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

func TestHighPriorityFirstForSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var order []Priority
		var mu sync.Mutex
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			o := optionsFrom(r.Context())
			p := PriorityNormal
			if o != nil {
				p = o.priority
			}
			order = append(order, p)
			mu.Unlock()
			time.Sleep(time.Second)
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := New(base, WithLimit(Limit{MaxConcurrent: 1}))
		var wg sync.WaitGroup
		for _, p := range []Priority{PriorityNormal, PriorityLow, PriorityNormal, PriorityHigh} {
			time.Sleep(time.Millisecond) // queue them in this order
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(WithPriority(context.Background(), p)))
				if err == nil {
					_ = resp.Body.Close()
				}
			})
		}
		wg.Wait()
		want := []Priority{PriorityNormal, PriorityHigh, PriorityNormal, PriorityLow}
		if fmt.Sprint(order) != fmt.Sprint(want) {
			t.Errorf("sent in order %v, want %v", order, want)
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
		st := tr.LimitStatus("api.example.com")
		if len(st.Scopes) != 3 || st.Scopes[1].Key != "" || st.Scopes[0].Name != "minute" || st.Scopes[0].Burst != 3 || st.Scopes[2].Name != LearnedScope {
			t.Errorf("LimitStatus scopes = %+v", st.Scopes)
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
		for i := range 100_000 {
			r := req.Clone(req.Context())
			r.URL.Path = fmt.Sprintf("/items/%d", i)
			resp, err := tr.RoundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		if n := s.states.Len(); n < 50_000 {
			t.Fatalf("%d keys held right after the run, want most of the 100,000 (not yet idle)", n)
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
		if n := s.states.Len(); n > 3 {
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

func TestSlotBeforeTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Two slow requests hold both slots for 10s while four more queue:
		// when the slots free, the queued ones must still keep the pace of
		// one a second, not go at once on tokens taken while they waited.
		var mu sync.Mutex
		var sent []time.Duration
		start := time.Now()
		stall := make(chan struct{})
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, time.Since(start))
			n := len(sent)
			mu.Unlock()
			if n <= 2 {
				<-stall
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := New(base, WithLimit(Limit{Rate: 1, Burst: 1, MaxConcurrent: 2}))
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				if resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
					_ = resp.Body.Close()
				}
			})
		}
		time.Sleep(10 * time.Second)
		close(stall)
		wg.Wait()
		slices.Sort(sent)
		for i := 1; i < len(sent); i++ {
			if gap := sent[i] - sent[i-1]; gap < time.Second {
				t.Fatalf("sent at %v: two requests %v apart with a rate of 1/s", sent, gap)
			}
		}
	})
}

func TestSlotFreedWhenALaterScopeRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(),
			WithLimit(Limit{Name: "slots", MaxConcurrent: 1}),
			WithLimit(Limit{Name: "bucket", Rate: rate.Every(time.Hour), FailFast: true}))
		getN(t, tr, 1)
		if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)); !errors.Is(err, ErrLimited) {
			t.Fatalf("err = %v, want the bucket's refusal", err)
		}
		if st := tr.LimitStatus(host).Scopes[0]; st.InFlight != 0 {
			t.Errorf("%d slots still taken after the refusal, want 0", st.InFlight)
		}
	})
}

func TestSlotHandedOnWhenAWaiterGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &slowBase{}
		tr := New(base, WithLimit(Limit{MaxConcurrent: 1}))
		errs := make(chan error, 3)
		ctx, cancel := context.WithCancel(context.Background())
		for i := range 3 {
			go func() {
				c := context.Background()
				if i == 1 {
					c = ctx // the second in line gives up
				}
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(c))
				if err == nil {
					_ = resp.Body.Close()
				}
				errs <- err
			}()
			time.Sleep(time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
		var canceled, ok int
		for range 3 {
			switch err := <-errs; {
			case err == nil:
				ok++
			case errors.Is(err, context.Canceled):
				canceled++
			default:
				t.Errorf("unexpected error %v", err)
			}
		}
		if ok != 2 || canceled != 1 || base.calls.Load() != 2 {
			t.Errorf("%d succeeded, %d cancelled, %d sent; want 2, 1, 2", ok, canceled, base.calls.Load())
		}
		if st := tr.LimitStatus(host).Scopes[0]; st.InFlight != 0 || st.Waiting != 0 {
			t.Errorf("after the run: %d in flight, %d waiting; want 0, 0", st.InFlight, st.Waiting)
		}
	})
}

func TestSlotAccountingUnderChaos(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Errors, 429s, nil bodies, deadlines and priorities, through three
		// scopes at once: afterwards no slot, queue place or hold is left.
		var mu sync.Mutex
		r := rand.New(rand.NewPCG(1, 2))
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			kind, delay := r.IntN(6), time.Duration(r.IntN(500))*time.Millisecond
			mu.Unlock()
			select {
			case <-time.After(delay):
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
			switch kind {
			case 0:
				return nil, errReset
			case 1:
				return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody}, nil
			case 2:
				return &http.Response{StatusCode: 503}, nil // no body at all
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := New(base, WithRetry(RetryPolicy{MaxAttempts: 4, InitialDelay: 100 * time.Millisecond}),
			WithCooldown(CooldownPolicy{Off: true}),
			WithLimit(Limit{Name: "a", MaxConcurrent: 3}),
			WithLimit(Limit{Name: "b", MaxConcurrent: 2, Key: Global, MaxQueue: 5, MaxWait: 2 * time.Second}),
			WithLimit(Limit{Name: "c", MaxConcurrent: 4, MinSpacing: 10 * time.Millisecond}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1000}))
		var wg sync.WaitGroup
		for i := range 300 {
			mu.Lock()
			timeout := time.Duration(r.IntN(3000)) * time.Millisecond
			mu.Unlock()
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				if i%3 == 0 {
					ctx = WithPriority(ctx, PriorityHigh)
				}
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
				if err == nil && resp.Body != nil {
					_ = resp.Body.Close()
				}
			})
		}
		wg.Wait()
		for _, s := range tr.scopes() {
			s.states.Each(func(key string, e *keyed.Entry[scopeState]) {
				if e.Holds() != 0 || e.State.slots.Load() != 0 || e.State.waiting != 0 || len(e.State.queue) != 0 {
					t.Errorf("scope %s, key %q: %d holds, %d in flight, %d waiting, %d queued; want none",
						s.name, key, e.Holds(), e.State.slots.Load(), e.State.waiting, len(e.State.queue))
				}
			})
		}
		tr.breakers.states.Each(func(key string, e *keyed.Entry[breakerState]) {
			if e.Holds() != 0 {
				t.Errorf("breaker %q still held %d times", key, e.Holds())
			}
		})
	})
}

// TestSlotWaitSpendsTheCallsBudget: a wait for a concurrency slot comes
// out of the call's own wait budget, so a later hint cannot take it past
// TotalWaitCap.
func TestSlotWaitSpendsTheCallsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The slow request holds the only slot for 3s; every other one is
		// refused with a 3s hint.
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Header.Get("X-Slow") != "" {
				time.Sleep(3 * time.Second)
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"3"}}, Body: http.NoBody}, nil
		})
		tr := New(base, WithRetry(RetryPolicy{TotalWaitCap: 5 * time.Second}), WithLimit(Limit{MaxConcurrent: 1}), WithCooldown(CooldownPolicy{Off: true}))
		go func() {
			req := mustRequest(t, http.MethodGet, nil)
			req.Header.Set("X-Slow", "1")
			if resp, err := tr.RoundTrip(req); err == nil {
				readAll(t, resp)
			}
		}()
		synctest.Wait() // the slow request is out, holding the slot
		ctx, stats := WithCallStats(context.Background())
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if err == nil {
			readAll(t, resp)
		}
		if w := stats.Waited(); w > 5*time.Second {
			t.Errorf("waited %v, past the 5s TotalWaitCap", w)
		}
	})
}
