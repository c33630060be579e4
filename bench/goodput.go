// Package bench measures ratewise against its peers: a goodput simulator,
// where workers make calls against a rate-limited server and the table
// says how fast the batch finished and how many requests the server had to
// refuse, and the per-request overhead benchmarks (overhead_test.go).
//
// The servers are ratewisetest's fake, third-party Go rate-limit and
// concurrency-limit middlewares of different models, and nginx's
// limit_req and limit_conn (see [APIs]); the clients are ratewise's
// defaults and presets and its peers as their users configure them (see
// [Contenders]). Each Go server runs on loopback and, but for one, in
// process, where a testing/synctest bubble makes a scenario of minutes
// take a second.
//
// Run both with `make bench`; cmd/goodput prints the simulator's tables on
// loopback, `make bench-fast` in fake time.
package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenario is one run of the simulator: the server's limit, the workers
// calling it and the calls they make. The limit is a bucket (Rate and
// Burst), a window (Limit per Window), a cap on requests served at once
// (Limit, each served in Service) or a share of requests shed (Shed); its
// [Kind] says which, and every server a scenario runs against keeps that
// kind of limit, configured with it.
type Scenario struct {
	Name string
	// Rate is a bucket's refill, requests a second.
	Rate float64
	// Burst is a bucket's size.
	Burst int
	// Limit is the requests a window admits, or a cap serves at once.
	Limit int
	// Window is a window's length; zero means the limit is not a window.
	Window time.Duration
	// Service is how long the server takes to serve an admitted request;
	// set, it makes the limit a concurrency cap of Limit.
	Service time.Duration
	// Shed is the share of requests a load shedder refuses, in (0, 1);
	// set, it makes the limit load shedding.
	Shed float64
	// Body, when set, makes each call a POST of this JSON body, which a
	// client can send again; empty means a GET.
	Body string
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
	// Attempts, when set, is how many attempts every client makes of a
	// call, the first and its retries; zero leaves each its default.
	Attempts int
	// MinBackoff and MaxBackoff, when set, are every client's first
	// backoff and its cap where the server names no wait; zero leaves
	// each its default.
	MinBackoff, MaxBackoff time.Duration
}

// Scenarios are the configurations every run covers: a bucket of 50/s
// burst 10, and one of 20/s burst 10 called by 50 and by 200 workers;
// windows of 50 per second and of 30 per 10 seconds; fleets of four and
// of eight clients sharing the 50/s bucket or the window of 50 per
// second; a cap of 5 requests at once, each served in 50 ms; and a load
// shedder refusing 2 requests in 3, called with POSTs, and with GETs (a
// transient 503 of which is retried too): 60 calls of 20 workers, 8
// attempts each, with the clients' default backoff and with one of 10 to
// 100 ms, and 200 calls of 20 workers with the clients' defaults.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "bucket", Rate: 50, Burst: 10, Workers: 20, Calls: 500},
		{Name: "bucket 50 workers", Rate: 20, Burst: 10, Workers: 50, Calls: 300},
		{Name: "bucket 200 workers", Rate: 20, Burst: 10, Workers: 200, Calls: 300},
		{Name: "window 1s", Limit: 50, Window: time.Second, Workers: 20, Calls: 500},
		{Name: "window 10s", Limit: 30, Window: 10 * time.Second, Workers: 10, Calls: 120},
		{Name: "fleet", Rate: 50, Burst: 10, Workers: 20, Calls: 500, Replicas: 4},
		{Name: "fleet 8", Rate: 50, Burst: 10, Workers: 40, Calls: 500, Replicas: 8},
		{Name: "window fleet", Limit: 50, Window: time.Second, Workers: 20, Calls: 500, Replicas: 4},
		{Name: "window fleet 8", Limit: 50, Window: time.Second, Workers: 40, Calls: 500, Replicas: 8},
		{Name: "cap", Limit: 5, Service: 50 * time.Millisecond, Workers: 20, Calls: 300},
		{Name: "shed", Shed: 2.0 / 3, Body: `{"name":"widget","count":1}`, Workers: 50, Calls: 50},
		{Name: "shed GETs", Shed: 2.0 / 3, Workers: 20, Calls: 60, Attempts: 8},
		{Name: "shed GETs, short backoff", Shed: 2.0 / 3, Workers: 20, Calls: 60, Attempts: 8,
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		{Name: "shed GETs, 200 calls", Shed: 2.0 / 3, Workers: 20, Calls: 200},
	}
}

// Kind is the kind of the limit of s, told by the field that only that
// kind sets: Shed, Service, Window, or none of them for a bucket.
func (s Scenario) Kind() Kind {
	switch {
	case s.Shed > 0:
		return Shedding
	case s.Service > 0:
		return Concurrency
	case s.Window > 0:
		return Window
	}
	return Bucket
}

// replicas returns the number of clients, at least one.
func (s Scenario) replicas() int { return max(s.Replicas, 1) }

// untold reports whether contenders told the limit sit s out: a fleet's
// replicas are not told it, and a load shedder has none to tell.
func (s Scenario) untold() bool { return s.replicas() > 1 || s.Kind() == Shedding }

// Deadline is how long a run of s may take before its calls are cut
// short: ten times the ideal of a plain token bucket, fixed window or
// concurrency cap, and a minute more; five minutes against a load
// shedder, which sets no pace, longer than any contender's retries.
func (s Scenario) Deadline() time.Duration {
	m := TokenBucket
	switch s.Kind() {
	case Window:
		m = FixedWindow
	case Concurrency:
		m = ConcurrencyCap
	case Shedding:
		return 5 * time.Minute
	}
	return 10*m.Ideal(s) + time.Minute
}

// limit describes the limit of s, such as "50/s burst 10".
func (s Scenario) limit() string {
	switch s.Kind() {
	case Window:
		return fmt.Sprintf("%d per %v", s.Limit, s.Window)
	case Concurrency:
		return fmt.Sprintf("%d at once, %v each", s.Limit, s.Service)
	case Shedding:
		return fmt.Sprintf("%.0f%% refused at any rate", 100*s.Shed)
	}
	return fmt.Sprintf("%g/s burst %d", s.Rate, s.Burst)
}

// String describes s: its name, limit, workers and calls.
func (s Scenario) String() string {
	calls := fmt.Sprintf("%d calls", s.Calls)
	if s.Body != "" {
		calls = fmt.Sprintf("%d POSTs", s.Calls)
	}
	if s.Attempts > 0 {
		calls += fmt.Sprintf(", %d attempts", s.Attempts)
	}
	if s.MaxBackoff > 0 {
		calls += fmt.Sprintf(", backoff %v to %v", s.MinBackoff, s.MaxBackoff)
	}
	if s.Replicas > 1 {
		return fmt.Sprintf("%s: %s, %d clients of %d workers, %s", s.Name, s.limit(), s.Replicas, s.Workers/s.Replicas, calls)
	}
	return fmt.Sprintf("%s: %s, %d workers, %s", s.Name, s.limit(), s.Workers, calls)
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
	// replicas are not, and a load shedder, which has none to tell, run
	// without it.
	Told bool
	// Kinds are the kinds of limit the contender runs against; nil means
	// every kind.
	Kinds []Kind
	// Client returns the client to make calls with, over base, for s.
	Client func(base http.RoundTripper, s Scenario) *http.Client
	// ForRun, when set, returns the contender a run makes its clients
	// with: one whose replicas share what the run gives them (a store).
	ForRun func() Contender
}

// Result is a contender's run of a scenario: a row of its table.
type Result struct {
	Contender string
	Wall      time.Duration
	Ideal     time.Duration
	Received  int // requests the server received
	Refused   int // of them, refused by the limit
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

// RefusedPerCall is the refusals the server answered per call made.
func (r Result) RefusedPerCall() float64 { return float64(r.Refused) / float64(r.Calls) }

// Run makes s.Calls calls, s.Workers at once, through c against srv, and
// reports them against ideal, the shortest time the server allows. The
// run ends at s.Deadline, or before when ctx ends.
func Run(ctx context.Context, s Scenario, c Contender, srv Server, ideal time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, s.Deadline())
	defer cancel()
	if c.ForRun != nil {
		c = c.ForRun()
	}
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
				ok := call(ctx, client, url, s.Body)
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

// call makes one call, a GET or, with a body, a POST of it as JSON, and
// reports whether it ended in a 200. A body read from a strings.Reader
// can be had again (the request's GetBody), so that a client may resend
// it.
func call(ctx context.Context, client *http.Client, url, body string) bool {
	method, r := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, r = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return false
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
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
