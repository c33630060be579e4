package bench_test

import (
	"fmt"

	"github.com/ratewise/ratewise/bench"
)

// The shortest time each scenario's calls can take, by the model of the
// server it runs against; a load shedder sets no pace, and has none.
func ExampleModel_Ideal() {
	models := []bench.Model{bench.TokenBucket, bench.NginxNoDelay, bench.NginxQueued, bench.FixedWindow, bench.SlidingWindow, bench.ConcurrencyCap}
	for _, s := range bench.Scenarios() {
		if s.Replicas > 1 {
			continue // a fleet's ideal is its limit's
		}
		for _, m := range models {
			if m.Kind() == s.Kind() {
				fmt.Printf("%s, %v: %v\n", s.Name, m, m.Ideal(s).Round(10_000_000))
			}
		}
	}
	// Output:
	// bucket, token bucket: 9.8s
	// bucket, nginx limit_req, nodelay: 9.78s
	// bucket, nginx limit_req, queued: 9.98s
	// bucket 50 workers, token bucket: 14.5s
	// bucket 50 workers, nginx limit_req, nodelay: 14.45s
	// bucket 50 workers, nginx limit_req, queued: 14.95s
	// bucket 200 workers, token bucket: 14.5s
	// bucket 200 workers, nginx limit_req, nodelay: 14.45s
	// bucket 200 workers, nginx limit_req, queued: 14.95s
	// window 1s, fixed window: 9s
	// window 1s, sliding-window counter: 9.99s
	// window 10s, fixed window: 30s
	// window 10s, sliding-window counter: 39.83s
	// cap, concurrency cap: 3s
}
