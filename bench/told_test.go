package bench

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestNginx runs nginx's limit_req in its two forms on loopback: twenty
// calls at once into a burst of 5. With nodelay, 6 pass at once; queued,
// one passes, 5 wait in nginx to be answered a quarter second apart, and
// the 14 others are refused. Its limit_conn of 6, in front of an
// application that takes 300ms, serves 6 of twenty at once and refuses
// the 14 others.
func TestNginx(t *testing.T) {
	if _, err := Nginx(); err != nil {
		t.Skipf("nginx cannot be had here, so its tables cannot run: %v", err)
	}
	tests := []struct {
		api     string
		s       Scenario
		slowest time.Duration // the last call's answer comes no sooner
	}{
		{"limit_req nodelay", Scenario{Name: "nodelay", Rate: 1, Burst: 5, Workers: 20, Calls: 20}, 0},
		{"limit_req queued", Scenario{Name: "queued", Rate: 4, Burst: 5, Workers: 20, Calls: 20}, 1250 * time.Millisecond},
		{"limit_conn", Scenario{Name: "cap", Limit: 6, Service: 300 * time.Millisecond, Workers: 20, Calls: 20}, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			api := apiNamed(t, "^nginx "+tt.api+"$")
			if api.InProcess != nil {
				t.Errorf("%s has an in-process form", api.Name)
			}
			srv, err := api.Loopback(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r := Run(context.Background(), tt.s, Plain(), srv, api.Ideal(tt.s))
			if r.Received != 20 || r.Refused != 14 || r.Failed != 14 || r.Cut {
				t.Errorf("Run = %d received, %d refused, %d failed, cut %v; want 20, 14, 14, not cut", r.Received, r.Refused, r.Failed, r.Cut)
			}
			if r.Wall < tt.slowest {
				t.Errorf("Run took %v, want at least %v", r.Wall, tt.slowest)
			}
			if tt.api != "limit_req nodelay" {
				return // the queue has drained, the places are free: one more request would pass
			}
			resp, body := get(t, srv.Transport(), srv.URL())
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "<title>429 Too Many Requests</title>") {
				t.Errorf("one more request = %d %q, want 429 and nginx's error page", resp.StatusCode, body)
			}
			for _, h := range []string{"Retry-After", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Reset"} {
				if v, ok := resp.Header[h]; ok {
					t.Errorf("refusal header %s = %q, want none", h, v)
				}
			}
		})
	}
}

// TestToldTheLimitInProcess runs every in-process server but the load
// shedders, which have no limit to tell, against ratewise told its limit:
// no refusal, no failure, and against a token bucket exactly the ideal
// time. A sliding-window counter, told as the L per W its documentation
// says, weighs the last window's requests in and may refuse some: against
// it, no call fails. The server with 503s behind it refuses nothing, and
// its 503s, transient errors of GETs, are retried: no call fails. Against a cap,
// the learned pace, on beside a MaxConcurrent, sends a key's first request
// alone: the run takes the ideal or one service time more.
func TestToldTheLimitInProcess(t *testing.T) {
	scenarios := map[Kind]Scenario{
		Bucket:      {Name: "told bucket", Rate: 10, Burst: 5, Workers: 5, Calls: 25},
		Window:      {Name: "told window", Limit: 8, Window: 10 * time.Second, Workers: 5, Calls: 20},
		Concurrency: {Name: "told cap", Limit: 3, Service: 100 * time.Millisecond, Workers: 5, Calls: 20},
	}
	told := contenderNamed(t, "ratewise told the limit")
	for _, api := range APIs() {
		s, ok := scenarios[api.Model.Kind()]
		if api.InProcess == nil || !ok {
			continue
		}
		t.Run(api.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s.Model = api.Model
				srv := startInProcess(t, api, s)
				r := Run(context.Background(), s, told, srv, api.Ideal(s))
				failing := strings.Contains(api.Name, "503s")
				switch {
				case api.Model == SlidingWindow:
					if r.Failed != 0 {
						t.Errorf("Run = %d received, %d refused, %d failed; want no failure", r.Received, r.Refused, r.Failed)
					}
				case failing:
					if r.Received <= s.Calls || r.Refused != 0 || r.Failed != 0 {
						t.Errorf("Run = %d received, %d refused, %d failed; want more than %d (the 503s retried), 0, 0", r.Received, r.Refused, r.Failed, s.Calls)
					}
				case r.Received != s.Calls || r.Refused != 0 || r.Failed != 0:
					t.Errorf("Run = %d received, %d refused, %d failed; want %d, 0, 0", r.Received, r.Refused, r.Failed, s.Calls)
				}
				// A leaky bucket's ideal counts one more than the burst it is
				// told: only the token buckets are exact.
				switch {
				case (api.Model == TokenBucket || api.Model == GCRA) && !failing && r.Wall != r.Ideal:
					t.Errorf("Run took %v, want the ideal %v", r.Wall, r.Ideal)
				case api.Model == ConcurrencyCap && (r.Wall < r.Ideal || r.Wall > r.Ideal+s.Service):
					t.Errorf("Run took %v, want the ideal %v or one service time more", r.Wall, r.Ideal)
				}
			})
		})
	}
}

// TestDefaultsLearnAMidSecondSlidingWindow runs ratewise's defaults
// against go-chi/httprate's sliding-window counter started a fraction of a
// second past a whole one, as every real server is: its X-RateLimit-Reset,
// a Unix time, is cut to the second, so each window turns a fraction of a
// second after the reset it names, and its Retry-After is the whole
// window. The defaults of one client must still learn the counter's
// pace: within 10% of the ideal, at most 0.05 refused a call (a run, or
// the median of three when a run misses), no call failed. (A fleet's clients learn apart, each from what the others
// leave it; their tables measure that, and this test does not.)
func TestDefaultsLearnAMidSecondSlidingWindow(t *testing.T) {
	api := apiNamed(t, "go-chi/httprate")
	defaults := contenderNamed(t, "ratewise defaults")
	for _, s := range Scenarios() {
		if !api.Fits(s) || s.Replicas > 1 {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			// A run is a draw (the retries' jitter, the order the workers
			// wake in, shuffled more under -race): a run that misses is made
			// twice more, and the median of the three is held to the targets.
			var ratios, refused []float64
			for range 3 {
				synctest.Test(t, func(t *testing.T) {
					time.Sleep(time.Until(fakeStart))
					s.Model = api.Model
					srv, err := api.InProcess(s)
					if err != nil {
						t.Fatal(err)
					}
					defer srv.Close()
					r := Run(context.Background(), s, defaults, srv, api.Ideal(s))
					if r.Failed != 0 {
						t.Errorf("%d calls failed, want none", r.Failed)
					}
					ratios, refused = append(ratios, r.WallRatio()), append(refused, r.RefusedPerCall())
				})
				if ratios[0] <= 1.10 && refused[0] <= 0.05 {
					return
				}
			}
			slices.Sort(ratios)
			slices.Sort(refused)
			if ratios[1] > 1.10 || refused[1] > 0.05 {
				t.Errorf("the median of 3 runs: %.2f of the ideal, %.3f refused a call; want at most 1.10, 0.05", ratios[1], refused[1])
			}
		})
	}
}

// startInProcess starts api's in-process server for s inside a
// testing/synctest bubble, its fake clock first moved to this decade (a
// Unix-time reset of the 2000s would read as a delta); the server stops
// when the test ends.
func startInProcess(t *testing.T, api API, s Scenario) Server {
	t.Helper()
	time.Sleep(time.Until(fakeStart))
	srv, err := api.InProcess(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}
