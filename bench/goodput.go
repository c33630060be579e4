// Package bench measures ratewise against its peers: a goodput simulator,
// where workers make calls against a rate-limited server and the table
// says how fast the batch finished and how many requests the server had to
// refuse, and the per-request overhead benchmarks (overhead_test.go).
//
// The servers are ratewisetest's fake, five third-party Go rate-limit
// middlewares of different models and nginx's limit_req (see [APIs]); the
// clients are ratewise's defaults and presets and its peers as their
// users configure them (see [Contenders]). Each Go server runs on
// loopback and, but for one, in process, where a testing/synctest bubble
// makes a scenario of minutes take a second.
//
// Run both with `make bench`; cmd/goodput prints the simulator's tables on
// loopback, `make bench-fast` in fake time.
package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"
)

// Scenario is one run of the simulator: the server's limit, the workers
// calling it and the calls they make. The limit is a bucket (Rate and
// Burst) or a window (Limit per Window); every server a scenario runs
// against is configured with it.
type Scenario struct {
	Name string
	// Rate is a bucket's refill, requests a second.
	Rate float64
	// Burst is a bucket's size.
	Burst int
	// Limit is the requests a window admits.
	Limit int
	// Window is a window's length; zero means the limit is a bucket.
	Window time.Duration
	// Workers are the callers at once, shared among the replicas.
	Workers int
	// Calls are the calls made in all.
	Calls int
	// Model is how the server of the table counts, which Matchups sets:
	// a contender told the limit tells it in that form.
	Model Model
	// Replicas is the number of separate clients of a fleet, each built
	// anew by the contender, that the workers are dealt to in turn; zero
	// means one. A fleet is not told the limit: contenders that are told
	// it sit it out.
	Replicas int
}

// Scenarios are the configurations every run covers: a bucket of 50/s
// burst 10; windows of 50 per second and of 30 per 10 seconds; and a
// fleet of four clients sharing the bucket.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "bucket", Rate: 50, Burst: 10, Workers: 20, Calls: 500},
		{Name: "window 1s", Limit: 50, Window: time.Second, Workers: 20, Calls: 500},
		{Name: "window 10s", Limit: 30, Window: 10 * time.Second, Workers: 10, Calls: 120},
		{Name: "fleet", Rate: 50, Burst: 10, Workers: 20, Calls: 500, Replicas: 4},
	}
}

// Windowed reports whether the scenario's limit is a window.
func (s Scenario) Windowed() bool { return s.Window > 0 }

// replicas returns the number of clients, at least one.
func (s Scenario) replicas() int { return max(s.Replicas, 1) }

// Deadline is how long a run of s may take before its calls are cut
// short: ten times the ideal of a plain token bucket or fixed window, and
// a minute more.
func (s Scenario) Deadline() time.Duration {
	m := TokenBucket
	if s.Windowed() {
		m = FixedWindow
	}
	return 10*m.Ideal(s) + time.Minute
}

// String describes s: its name, limit, workers and calls.
func (s Scenario) String() string {
	limit := fmt.Sprintf("%g/s burst %d", s.Rate, s.Burst)
	if s.Windowed() {
		limit = fmt.Sprintf("%d per %v", s.Limit, s.Window)
	}
	if s.Replicas > 1 {
		return fmt.Sprintf("%s: %s, %d clients of %d workers, %d calls", s.Name, limit, s.Replicas, s.Workers/s.Replicas, s.Calls)
	}
	return fmt.Sprintf("%s: %s, %d workers, %d calls", s.Name, limit, s.Workers, s.Calls)
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
	// Told says the contender is told the server's limit; a fleet, whose
	// replicas are not, runs without it.
	Told bool
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
	// Cut says the run reached its deadline: the calls still waiting
	// then failed, and those not yet started were not made (and count as
	// failed).
	Cut bool
}

// WallRatio is the wall time over the ideal.
func (r Result) WallRatio() float64 { return r.Wall.Seconds() / r.Ideal.Seconds() }

// RefusedPerCall is the 429s the server answered per call made.
func (r Result) RefusedPerCall() float64 { return float64(r.Refused) / float64(r.Calls) }

// Filter selects scenarios, servers and contenders: each regexp, when
// set, must match the scenario's description, the server's name or the
// contender's name.
type Filter struct {
	Scenario, Server, Contender *regexp.Regexp
}

func (f Filter) match(re *regexp.Regexp, s string) bool { return re == nil || re.MatchString(s) }

// Matchup is one table: a scenario, a server and the contenders that run
// it against the server.
type Matchup struct {
	Scenario   Scenario
	API        API
	Contenders []Contender
}

// Matchups are the tables f selects, in order: each scenario against each
// server that fits it, with every contender that may run it (a fleet
// leaves out those told the limit). inProcess leaves out the servers that
// cannot run in fake time.
func Matchups(f Filter, inProcess bool) []Matchup {
	var all []Matchup
	for _, s := range Scenarios() {
		if !f.match(f.Scenario, s.String()) {
			continue
		}
		for _, api := range APIs() {
			if !api.Fits(s) || !f.match(f.Server, api.Name) || inProcess && api.InProcess == nil {
				continue
			}
			m := Matchup{Scenario: s, API: api}
			m.Scenario.Model = api.Model
			for _, c := range Contenders() {
				if f.match(f.Contender, c.Name) && !(c.Told && s.replicas() > 1) {
					m.Contenders = append(m.Contenders, c)
				}
			}
			if len(m.Contenders) > 0 {
				all = append(all, m)
			}
		}
	}
	return all
}

// Run makes s.Calls calls, s.Workers at once, through c against srv, and
// reports them against ideal, the shortest time the server allows. The
// run ends at s.Deadline, or before when ctx ends.
func Run(ctx context.Context, s Scenario, c Contender, srv Server, ideal time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, s.Deadline())
	defer cancel()
	clients := make([]*http.Client, s.replicas())
	for i := range clients {
		clients[i] = c.Client(srv.Transport(), s)
	}
	url := srv.URL() + "/items"
	calls := make(chan struct{})
	var mu sync.Mutex
	var latencies []time.Duration
	made, failed := 0, 0
	var wg sync.WaitGroup
	start := time.Now()
	for w := range s.Workers {
		client := clients[w%len(clients)]
		wg.Go(func() {
			for range calls {
				began := time.Now()
				ok := call(ctx, client, url)
				took := time.Since(began)
				mu.Lock()
				latencies = append(latencies, took)
				made++
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
	return Result{Contender: c.Name, Wall: wall, Ideal: ideal, Received: received, Refused: refused,
		Failed: failed + s.Calls - made, P50: percentile(latencies, 50), P99: percentile(latencies, 99),
		Calls: s.Calls, Cut: ctx.Err() != nil}
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

// Table writes the results of s against api as a Markdown table, under a
// heading and a line saying how the server limits and refuses.
func Table(w io.Writer, s Scenario, api API, results []Result) {
	fmt.Fprintf(w, "### %s — %s — ideal %.2fs\n\n", s, api.Title(), api.Ideal(s).Seconds())
	fmt.Fprintf(w, "%s. Refuses with %s.\n\n", api.Describe(s), api.Refusal)
	fmt.Fprintln(w, "| client | wall | wall / ideal | requests | 429s per call | failed calls | p50 | p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		cut := ""
		if r.Cut {
			cut = " (cut)"
		}
		fmt.Fprintf(w, "| %s | %.2fs%s | %.2f | %d | %.3f | %d | %s | %s |\n", r.Contender, r.Wall.Seconds(), cut,
			r.WallRatio(), r.Received, r.RefusedPerCall(), r.Failed, round(r.P50), round(r.P99))
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
