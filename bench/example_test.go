package bench_test

import (
	"fmt"

	"github.com/ratewise/ratewise/bench"
)

// The shortest time each scenario's calls can take, by the model of the
// server it runs against.
func ExampleModel_Ideal() {
	for _, s := range bench.Scenarios()[:3] {
		for _, m := range []bench.Model{bench.TokenBucket, bench.NginxNoDelay, bench.NginxQueued, bench.FixedWindow, bench.SlidingWindow} {
			if m.Windowed() == s.Windowed() {
				fmt.Printf("%s, %v: %v\n", s.Name, m, m.Ideal(s).Round(10_000_000))
			}
		}
	}
	// Output:
	// bucket, token bucket: 9.8s
	// bucket, nginx limit_req, nodelay: 9.78s
	// bucket, nginx limit_req, queued: 9.98s
	// window 1s, fixed window: 9s
	// window 1s, sliding-window counter: 9.99s
	// window 10s, fixed window: 30s
	// window 10s, sliding-window counter: 39.83s
}
