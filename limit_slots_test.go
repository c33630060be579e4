package ratewise

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// This file tests a scope's concurrency slots: held until the body closes,
// taken before the turn, freed and handed on when a request gives up, and
// under chaos.

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
		if st := tr.KeyStatus("api.example.com").Scopes[0]; st.InFlight != 0 || st.Waiting != 0 {
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
		if st := tr.KeyStatus(host).Scopes[0]; st.InFlight != 0 {
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
		if st := tr.KeyStatus(host).Scopes[0]; st.InFlight != 0 || st.Waiting != 0 {
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
			WithPause(PausePolicy{Off: true}),
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
			s.Holding(func(key string, holds, slots, waiting, queued int) {
				t.Errorf("scope %s, key %q: %d holds, %d in flight, %d waiting, %d queued; want none",
					s.Name(), key, holds, slots, waiting, queued)
			})
		}
		for key, holds := range tr.breakers.Held() {
			t.Errorf("breaker %q still held %d times", key, holds)
		}
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
		tr := New(base, WithRetry(RetryPolicy{TotalWaitCap: 5 * time.Second}), WithLimit(Limit{MaxConcurrent: 1}), WithPause(PausePolicy{Off: true}))
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
