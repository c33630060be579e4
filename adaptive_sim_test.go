package ratewise

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

// bucketAPI is a token-bucket API answering in the caller's goroutine,
// for runs in synctest bubbles, with Retry-After in whole seconds and,
// with headers, its count in X-RateLimit-* and the IETF RateLimit.
func bucketAPI(r float64, burst int, latency time.Duration, headers bool) *ratewisetest.Bucket {
	return ratewisetest.NewBucket(ratewisetest.Config{Rate: r, Burst: burst, Latency: latency,
		PublishHeaders: headers, IETFHeaders: headers})
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
			srv := bucketAPI(sc.r, sc.burst, sc.latency, sc.headers)
			tr := New(srv, WithRetry(RetryPolicy{MaxAttempts: 10}), WithLimit(Limit{Adaptive: true}))
			wall, failed := goodput(tr, sc.w, sc.n)
			ideal := float64(sc.n-sc.burst) / sc.r
			t.Logf("%g/s w=%d n=%d: wall %.2fs (%.2f of ideal), %d received, %d refused (%.3f/call), %d failed",
				sc.r, sc.w, sc.n, wall.Seconds(), wall.Seconds()/ideal, srv.Stats().Received, srv.Stats().Limited, float64(srv.Stats().Limited)/float64(sc.n), failed)
		})
	}
}
