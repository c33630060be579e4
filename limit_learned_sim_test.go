package ratewise

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
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
	return goodputOf(tr, workers, calls, func() *http.Request {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/items", nil)
		return req
	})
}

// goodputPost is goodput of POSTs, each with a small JSON body that can
// be sent again.
func goodputPost(tr http.RoundTripper, workers, calls int) (time.Duration, int) {
	wall, failed, _ := goodputOf(tr, workers, calls, func() *http.Request {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://api.test/items",
			strings.NewReader(`{"item":1}`))
		return req
	})
	return wall, failed
}

// goodputOf runs calls calls of the requests newReq makes, workers at
// once, through tr; it returns the wall time, the failed calls and why the
// first failed.
func goodputOf(tr http.RoundTripper, workers, calls int, newReq func() *http.Request) (time.Duration, int, string) {
	jobs := make(chan struct{})
	var mu sync.Mutex
	failed := 0
	var why string
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for range jobs {
				resp, err := tr.RoundTrip(newReq())
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

// TestAdaptiveGoodputInFakeTime runs the goodput scenarios of the bench
// module in fake time and holds adaptive pacing to their targets: within
// 10% of the ideal time and 0.05 refusals a call from Retry-After alone,
// 3% and 0.01 with rate-limit headers, no call failed. Without headers
// nothing can keep the first wave of workers from a bucket smaller than
// it (the key has learned nothing yet): its refusals come on top. The
// figures are the medians of three runs of each: the order in which fake
// time wakes the requests of one instant moves a refusal or two (of 20
// workers on 50/s with 5 ms a request, 1000 runs of one took 1.00 to
// 1.03 but for two, up to 1.11; see TestBurstRunOutIsNoCap). With -v it
// logs every decision of the pacer, for tuning.
func TestAdaptiveGoodputInFakeTime(t *testing.T) {
	for _, sc := range []struct {
		r           float64
		burst, w, n int
		latency     time.Duration
		headers     bool
	}{{50, 10, 20, 500, 0, false}, {20, 10, 50, 300, 0, false}, {50, 10, 200, 500, 0, false}, {50, 10, 20, 500, 5 * time.Millisecond, false},
		{50, 10, 20, 500, 0, true}, {20, 10, 50, 300, 0, true}} {
		var ratios, refusals []float64
		for range 3 {
			synctest.Test(t, func(t *testing.T) {
				srv := bucketAPI(sc.r, sc.burst, sc.latency, sc.headers)
				tr := New(srv, WithRetry(RetryPolicy{MaxAttempts: 10}))
				if testing.Verbose() {
					traceLearning(tr, t.Logf)
				}
				wall, failed := goodput(tr, sc.w, sc.n)
				if failed > 0 {
					t.Errorf("%g/s w=%d n=%d latency %v headers %v: %d calls failed, want none", sc.r, sc.w, sc.n, sc.latency, sc.headers, failed)
				}
				ideal := float64(sc.n-sc.burst) / sc.r
				ratios = append(ratios, wall.Seconds()/ideal)
				refusals = append(refusals, float64(srv.Stats().Limited)/float64(sc.n))
			})
		}
		slices.Sort(ratios)
		slices.Sort(refusals)
		maxRatio, maxRefused := 1.10, 0.05+float64(max(sc.w-sc.burst, 0))/float64(sc.n)
		if sc.headers {
			maxRatio, maxRefused = 1.03, 0.01
		}
		if ratios[1] > maxRatio || refusals[1] > maxRefused {
			figuref(t, "%g/s w=%d n=%d latency %v headers %v: %.2f of ideal, %.3f refused a call (medians of %.2f, %.3f); want at most %.2f, %.2f",
				sc.r, sc.w, sc.n, sc.latency, sc.headers, ratios[1], refusals[1], ratios, refusals, maxRatio, maxRefused)
		}
	}
}
