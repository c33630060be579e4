package ratewise

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// bucketServer is a token-bucket API answering in the caller's goroutine,
// for runs in synctest bubbles: Retry-After in whole seconds, as
// ratewisetest's server sends it.
type bucketServer struct {
	mu       sync.Mutex
	lim      *rate.Limiter
	r        float64
	latency  time.Duration
	headers  bool // publish X-RateLimit-* and RateLimit, as ratewisetest does
	received int
	refused  int
}

func newBucketServer(r float64, burst int, latency time.Duration) *bucketServer {
	return &bucketServer{lim: rate.NewLimiter(rate.Limit(r), burst), r: r, latency: latency}
}

func (b *bucketServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.latency > 0 {
		time.Sleep(b.latency)
	}
	b.mu.Lock()
	b.received++
	now := time.Now()
	ok := b.lim.AllowN(now, 1)
	tokens := math.Max(b.lim.TokensAt(now), 0)
	if !ok {
		b.refused++
	}
	b.mu.Unlock()
	h := http.Header{}
	if b.headers {
		burst := float64(b.lim.Burst())
		untilFull, untilOne := (burst-tokens)/b.r, math.Max(1-tokens, 0)/b.r
		reset := untilFull
		if int(tokens) == 0 {
			reset = untilOne
		}
		h.Set("X-RateLimit-Limit", strconv.Itoa(b.lim.Burst()))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(int(tokens)))
		h.Set("X-RateLimit-Reset", strconv.Itoa(int(math.Ceil(untilFull))))
		h.Set("RateLimit", `"default";r=`+strconv.Itoa(int(tokens))+";t="+strconv.Itoa(int(math.Ceil(reset))))
	}
	if ok {
		return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
	}
	h.Set("Retry-After", strconv.Itoa(max(int(math.Ceil((1-tokens)/b.r)), 1)))
	return &http.Response{StatusCode: 429, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// goodput runs calls calls, workers at once, through tr against srv and
// returns the wall time and the failed calls.
func goodput(tr http.RoundTripper, workers, calls int) (time.Duration, int) {
	wall, failed, _ := goodputErr(tr, workers, calls)
	return wall, failed
}

// goodputErr is goodput that also says why the first failed call failed.
func goodputErr(tr http.RoundTripper, workers, calls int) (time.Duration, int, string) {
	jobs := make(chan struct{})
	var mu sync.Mutex
	failed := 0
	var why string
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range jobs {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/items", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					mu.Lock()
					failed++
					if why == "" && err != nil {
						why = err.Error()
					} else if why == "" {
						why = resp.Status
					}
					mu.Unlock()
				}
			}
		})
	}
	for range calls {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	return time.Since(start), failed, why
}

func TestAdaptiveTrace(t *testing.T) {
	if testing.Short() || !testing.Verbose() {
		t.Skip("a trace for tuning: go test -v -run TestAdaptiveTrace")
	}
	for _, sc := range []struct {
		r           float64
		burst, w, n int
		latency     time.Duration
		headers     bool
	}{{50, 10, 20, 500, 0, false}, {20, 10, 50, 300, 0, false}, {50, 10, 200, 500, 0, false}, {50, 10, 20, 500, 5 * time.Millisecond, false},
		{50, 10, 20, 500, 0, true}, {20, 10, 50, 300, 0, true}} {
		synctest.Test(t, func(t *testing.T) {
			adaptiveTrace = t.Logf
			defer func() { adaptiveTrace = nil }()
			srv := newBucketServer(sc.r, sc.burst, sc.latency)
			srv.headers = sc.headers
			tr := New(srv, WithRetry(RetryPolicy{MaxAttempts: 10}), WithLimit(Limit{Adaptive: true}))
			wall, failed := goodput(tr, sc.w, sc.n)
			ideal := float64(sc.n-sc.burst) / sc.r
			t.Logf("%g/s w=%d n=%d: wall %.2fs (%.2f of ideal), %d received, %d refused (%.3f/call), %d failed",
				sc.r, sc.w, sc.n, wall.Seconds(), wall.Seconds()/ideal, srv.received, srv.refused, float64(srv.refused)/float64(sc.n), failed)
		})
	}
}
