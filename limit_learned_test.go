package ratewise

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
)

// windowServer is an API with a fixed window quota, which publishes its
// count: it refuses every request over limit until the window turns.
type windowServer struct {
	mu       sync.Mutex
	limit    int
	window   time.Duration
	start    time.Time
	used     int
	times    []time.Time
	refusals int
}

func (s *windowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.start.IsZero() || now.Sub(s.start) >= s.window {
		s.start, s.used = now, 0
	}
	s.times = append(s.times, now)
	status := 200
	if s.used < s.limit {
		s.used++
	} else {
		status = 429
		s.refusals++
	}
	reset := s.start.Add(s.window).Sub(now)
	h := http.Header{
		"X-Ratelimit-Limit":     {strconv.Itoa(s.limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(s.limit - s.used)},
		"X-Ratelimit-Reset":     {strconv.Itoa(int(math.Ceil(reset.Seconds())))},
	}
	if status == 429 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(reset.Seconds()))))
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func TestAdaptiveCountedBucketIsNeverRefused(t *testing.T) {
	for _, workers := range []int{20, 200} {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(50, 10, 5*time.Millisecond, true)
			tr := New(srv, WithLimit(Limit{Adaptive: true}))
			_, failed, why := goodputErr(tr, workers, 300)
			if refused := srv.Stats().Limited; refused != 0 || failed != 0 {
				t.Errorf("%d workers: %d refused, %d failed calls (%s), want none: the count said what the server would take",
					workers, refused, failed, why)
			}
		})
	}
}

// TestAdaptiveCountedWindowIsSentAtOnce: a window's quota, counted, is
// sent at once and then waited for until the reset the count says, as a
// client that knows the window does: the refill a count of none left
// suggests (limit/reset) is tried once, the one refusal.
func TestAdaptiveCountedWindowIsSentAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &windowServer{limit: 30, window: time.Minute}
		tr := New(srv)
		wall, failed := goodput(tr, 10, 45)
		if failed != 0 {
			t.Fatalf("%d failed calls, want none", failed)
		}
		if srv.refusals > 1 {
			figuref(t, "%d refused, want at most the one try of the refill", srv.refusals)
		}
		first := srv.times[0]
		var inFirstSecond, beforeReset int
		for _, at := range srv.times {
			switch d := at.Sub(first); {
			case d < time.Second:
				inFirstSecond++
			case d < time.Minute:
				beforeReset++
			}
		}
		if inFirstSecond != 30 || wall != time.Minute {
			t.Errorf("%d requests in the first second, all done in %v; want the quota of 30 at once, the rest at the reset, 1m",
				inFirstSecond, wall)
		}
		if beforeReset > 1 { // each a refusal, counted above: a figure too
			figuref(t, "%d requests before the reset, want at most the one try of the refill", beforeReset)
		}
	})
}

// maxInAnySecond returns the most requests that started within one second.
func maxInAnySecond(times []time.Time) int {
	most := 0
	for i := range times {
		n := 0
		for _, other := range times[i:] {
			if other.Sub(times[i]) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// recording notes when each request reaches base.
type recording struct {
	base  http.RoundTripper
	mu    sync.Mutex
	times []time.Time
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func TestAdaptiveNeverExceedsRate(t *testing.T) {
	for _, headers := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(500, 100, 0, headers)
			rec := &recording{base: srv}
			tr := New(rec, WithLimit(Limit{Adaptive: true, Rate: 20}))
			if _, failed := goodput(tr, 20, 200); failed != 0 {
				t.Fatalf("%d failed calls", failed)
			}
			times := slices.Clone(rec.times)
			slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
			// A late start keeps its cadence: one more may fall in a second.
			if got := maxInAnySecond(times); got > 21 {
				t.Errorf("headers %v: %d requests in one second, want at most Rate 20 (+1)", headers, got)
			}
		})
	}
}

func TestAdaptiveLearnsTheServersRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(50, 10, 0, false)
		tr := New(srv, WithRetry(RetryPolicy{MaxAttempts: 10}), WithLimit(Limit{Adaptive: true}))
		_, failed := goodput(tr, 20, 500)
		if refused := srv.Stats().Limited; failed != 0 || float64(refused) > 0.05*500 {
			t.Errorf("%d refused, %d failed calls, want at most 25 and none", refused, failed)
		}
		st := tr.KeyStatus("api.test").Scopes[0]
		if !st.Adaptive || st.Counted || st.LearnedRate < 45 || st.LearnedRate > 55 {
			t.Errorf("status = %+v, want an adaptive pace within 10%% of the server's 50", st)
		}
	})
}

func TestAdaptiveStatusOfACountedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(50, 10, 0, true)
		tr := New(srv, WithLimit(Limit{Adaptive: true}))
		if _, failed := goodput(tr, 20, 200); failed != 0 {
			t.Fatalf("%d failed calls", failed)
		}
		st := tr.KeyStatus("api.test").Scopes[0]
		if !st.Adaptive || !st.Counted {
			t.Errorf("status = %+v, want the server's count", st)
		}
		if st.QuotaRemaining > 10 || st.LearnedRate < 40 || st.LearnedRate > 50 {
			figuref(t, "status = %+v, want the server's count and a sure refill just under its 50", st)
		}
		js, _ := json.Marshal(st)
		for _, want := range []string{`"adaptive":true`, `"counted":true`, `"quota_remaining":`, `"learned_rate_per_second":`} {
			if !strings.Contains(string(js), want) {
				t.Errorf("JSON %s lacks %s", js, want)
			}
		}
	})
}

func TestAdaptiveForgetsIdleKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(5, 1, 0, false)
		tr := New(srv, WithLimit(Limit{Adaptive: true, IdleTimeout: time.Minute}))
		get := func(host string) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		for range 5 {
			get("api.test") // refused at first, then paced
		}
		s := tr.scopes()[0]
		if look, ok := s.Look("api.test", time.Now()); !ok || !look.Learned || math.IsInf(look.Pace.Rate, 1) {
			t.Fatal("the key learned nothing from its refusals")
		}
		// Requests to other hosts, which learn nothing, drive the sweeps.
		for i := range 4 {
			time.Sleep(30 * time.Second)
			for range keyed.SweepCheckEvery {
				get("other-" + strconv.Itoa(i) + ".test")
			}
		}
		if _, ok := s.Look("api.test", time.Now()); ok {
			t.Error("an idle key's pace is still held after its idle timeout")
		}
	})
}

func TestAdaptiveBreakerCloseResumesGently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A 503 opens the breaker; its probe's success closes it: the
		// server just recovered, and the key's pace resumes at half,
		// climbing back (see learn's TestAdaptiveResumesAtHalfAfterLongPause).
		s := newScript(answer(503), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithLimit(Limit{Adaptive: true, StartRate: 40}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: 10 * time.Second}))
		start := time.Now()
		if status, _ := callOnce(t, tr, context.Background()); status != 503 {
			t.Fatalf("first call = %d, want the 503", status)
		}
		if got := tr.KeyStatus(host).Scopes[0].LearnedRate; got != 40 {
			t.Fatalf("pace after the 503 = %.1f, want the StartRate, 40", got)
		}
		if status, err := callOnce(t, tr, context.Background()); status != 200 || err != nil {
			t.Fatalf("the probe = %d, %v; want the 200 after the cooldown", status, err)
		}
		for i := range 2 {
			if status, err := callOnce(t, tr, context.Background()); status != 200 || err != nil {
				t.Fatalf("call = %d, %v; want 200", status, err)
			}
			if got := tr.KeyStatus(host).Scopes[0].LearnedRate; i == 0 && got != 20 {
				t.Errorf("pace once the breaker closed = %.1f, want half of 40", got)
			}
		}
		// The probe goes at the end of the cooldown, 10s on. Resumed at
		// half, 20 a second, the next request goes at once and the one
		// after it 50ms later; at 40 a second they would go 25ms and
		// 50ms after the probe.
		at := s.offsets(start)
		if want := []time.Duration{0, 10 * time.Second, 10 * time.Second, 10*time.Second + 50*time.Millisecond}; !slices.Equal(at, want) {
			t.Errorf("requests at %v, want %v: the pace resumed at half once the breaker closed", at, want)
		}
	})
}

// TestAdaptiveLongHintHoldsTheKeyAsAWindow: a refusal asking for more
// than a second holds every request of the key until then, as a window's
// end; then they go at once, not at the pace the key had.
func TestAdaptiveLongHintHoldsTheKeyAsAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "5"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithPause(PausePolicy{Off: true}),
			WithLimit(Limit{Adaptive: true, StartRate: 2}))
		start := time.Now()
		if status, _ := callOnce(t, tr, context.Background()); status != 429 {
			t.Fatalf("first call = %d, want the 429", status)
		}
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if status, err := callOnce(t, tr, context.Background()); status != 200 {
					t.Errorf("call = %d, %v; want 200", status, err)
				}
			})
		}
		wg.Wait()
		at := s.offsets(start)
		if want := []time.Duration{0, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(at, want) {
			t.Errorf("requests at %v, want the refused one, then the other five at the end of its 5s hint, at once", at)
		}
	})
}

func TestAdaptiveIdleBatchesKeepTheirPace(t *testing.T) {
	// A batch job: 50 calls every 10 minutes against 10 a second. The
	// idle time between batches is no measure of the server. Each batch
	// takes near the ideal (50 − 10) / 10 = 4s, 6s at most, in two runs
	// of three (holdsInTwoOfThree: the first batch, which learns, took
	// 6.3 to 7.8s in one run in 50).
	holdsInTwoOfThree(t, func() (measured string, held bool) {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(10, 10, 20*time.Millisecond, false)
			tr := New(srv, WithLimit(Limit{Adaptive: true}))
			var walls []time.Duration
			for i := range 5 {
				wall, failed, why := goodputErr(tr, 10, 50)
				if failed != 0 {
					t.Fatalf("batch %d: %d failed (%s), want none", i, failed, why)
				}
				walls = append(walls, wall)
				time.Sleep(10 * time.Minute)
			}
			measured, held = fmt.Sprintf("batches took %v, want each near the 4s the server allows", walls), slices.Max(walls) <= 6*time.Second
		})
		return measured, held
	})
}
