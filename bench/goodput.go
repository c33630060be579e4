// Package bench measures ratewise against its peers: a goodput simulator,
// where workers make calls against a rate-limited server and the table
// says how fast the batch finished and how many requests the server had to
// refuse, and the per-request overhead benchmarks (overhead_test.go).
//
// Run both with `make bench`; cmd/goodput prints the simulator's tables.
package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Scenario is one run of the simulator: a server's token bucket, the
// workers calling it and the calls they make.
type Scenario struct {
	Name    string
	Rate    float64       // the server's refill, requests a second
	Burst   int           // the server's bucket size
	Workers int           // callers at once
	Calls   int           // calls in all
	Latency time.Duration // the server's answer time
	// Headers makes the server publish its state in X-RateLimit-* and the
	// IETF RateLimit headers; otherwise a 429's Retry-After, in whole
	// seconds, is all a client learns.
	Headers bool
}

// Scenarios are the configurations every run covers: two servers and
// workers, then each with rate-limit headers, with 5ms of latency, and
// with 200 workers.
func Scenarios() []Scenario {
	base := []Scenario{
		{Name: "50/s", Rate: 50, Burst: 10, Workers: 20, Calls: 500},
		{Name: "20/s", Rate: 20, Burst: 10, Workers: 50, Calls: 300},
	}
	var all []Scenario
	for _, s := range base {
		all = append(all, s)
		h := s
		h.Headers = true
		all = append(all, h)
		l := s
		l.Latency = 5 * time.Millisecond
		all = append(all, l)
		w := s
		w.Workers = 200
		all = append(all, w)
	}
	return all
}

// Ideal is the shortest time the calls can take: the burst at once, the
// rest at the rate.
func (s Scenario) Ideal() time.Duration {
	return time.Duration(float64(s.Calls-s.Burst) / s.Rate * float64(time.Second))
}

func (s Scenario) String() string {
	h := "Retry-After only"
	if s.Headers {
		h = "rate-limit headers"
	}
	lat := ""
	if s.Latency > 0 {
		lat = fmt.Sprintf(", %v latency", s.Latency)
	}
	return fmt.Sprintf("%g/s burst %d, %d workers, %d calls, %s%s", s.Rate, s.Burst, s.Workers, s.Calls, h, lat)
}

// Server is what a run calls: a rate-limited API and its counts.
type Server interface {
	URL() string
	Transport() http.RoundTripper
	// Stats returns the requests received and those refused with 429.
	Stats() (received, refused int)
	Close()
}

// Contender is a client under test.
type Contender struct {
	Name string
	// Client returns the client to make calls with, over base, for s.
	Client func(base http.RoundTripper, s Scenario) *http.Client
}

// Result is a contender's run of a scenario: a row of its table.
type Result struct {
	Contender string
	Wall      time.Duration
	Ideal     time.Duration
	Received  int // requests the server received
	Refused   int // of them, answered 429
	Failed    int // calls that did not end in a 200
	P50, P99  time.Duration
	Calls     int
}

// WallRatio is the wall time over the ideal.
func (r Result) WallRatio() float64 { return r.Wall.Seconds() / r.Ideal.Seconds() }

// RefusedPerCall is the 429s the server answered per call made.
func (r Result) RefusedPerCall() float64 { return float64(r.Refused) / float64(r.Calls) }

// Run makes s.Calls calls, s.Workers at once, through c against srv.
func Run(ctx context.Context, s Scenario, c Contender, srv Server) Result {
	client := c.Client(srv.Transport(), s)
	calls := make(chan struct{})
	var mu sync.Mutex
	var latencies []time.Duration
	failed := 0
	var wg sync.WaitGroup
	start := time.Now()
	for range s.Workers {
		wg.Go(func() {
			for range calls {
				began := time.Now()
				ok := call(ctx, client, srv.URL()+"/items")
				took := time.Since(began)
				mu.Lock()
				latencies = append(latencies, took)
				if !ok {
					failed++
				}
				mu.Unlock()
			}
		})
	}
feed:
	for range s.Calls {
		select {
		case calls <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(calls)
	wg.Wait()
	wall := time.Since(start)
	received, refused := srv.Stats()
	slices.Sort(latencies)
	return Result{Contender: c.Name, Wall: wall, Ideal: s.Ideal(), Received: received, Refused: refused,
		Failed: failed, P50: percentile(latencies, 50), P99: percentile(latencies, 99), Calls: s.Calls}
}

// call makes one call and reports whether it ended in a 200.
func call(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}

// Table writes results as a Markdown table.
func Table(w io.Writer, s Scenario, results []Result) {
	fmt.Fprintf(w, "%s — ideal %.2fs\n\n", s, s.Ideal().Seconds())
	fmt.Fprintln(w, "| client | wall | wall / ideal | requests | 429s per call | failed calls | p50 | p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %.2fs | %.2f | %d | %.3f | %d | %s | %s |\n", r.Contender, r.Wall.Seconds(), r.WallRatio(),
			r.Received, r.RefusedPerCall(), r.Failed, round(r.P50), round(r.P99))
	}
	fmt.Fprintln(w)
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}
