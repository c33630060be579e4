package redis

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
)

// The fleet tests run each replica as its own OS process: this test
// binary, started again with RATEWISE_FLEET_WORKER set, runs fleetWorker
// instead of the tests and prints what it did as JSON.

func TestMain(m *testing.M) {
	if os.Getenv("RATEWISE_FLEET_WORKER") != "" {
		os.Exit(fleetWorker())
	}
	goleak.VerifyTestMain(m)
}

// workerReport is what a worker prints.
type workerReport struct {
	Calls    int            `json:"calls"`
	Statuses map[int]int    `json:"statuses"`
	Errors   map[string]int `json:"errors"`
	// LastReturned is when its last call returned, in Unix nanoseconds:
	// for a refused call, after its pause was in the store.
	LastReturned int64 `json:"last_returned"`
}

// stampSent is the base transport of a worker: it stamps each request with
// the time it leaves for the server (in X-Sent-At, Unix nanoseconds), on a
// clone, since a RoundTripper must not change its request.
type stampSent struct{ base http.RoundTripper }

func (s stampSent) RoundTrip(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	out.Header.Set("X-Sent-At", strconv.FormatInt(time.Now().UnixNano(), 10))
	return s.base.RoundTrip(out)
}

// fleetWorker is one replica: it makes FLEET_CALLS calls to FLEET_URL with
// FLEET_WORKERS goroutines, through a transport whose state is shared in
// the Redis at FLEET_REDIS, configured for FLEET_MODE.
func fleetWorker() int {
	env := func(k string) string { return os.Getenv(k) }
	num := func(k string) int { n, _ := strconv.Atoi(env(k)); return n }
	client := redistest.ClientOf(env("FLEET_REDIS"))
	defer client.Close()
	store := New(client, Options{Prefix: env("FLEET_PREFIX")})
	var opts []ratewise.Option
	switch env("FLEET_MODE") {
	case "limit":
		opts = append(opts, ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 1, Store: store}))
	case "store":
		// The same limit, and a breaker, shared by WithStore: a call asks
		// Redis for its breaker, its pause and its token in one script.
		opts = append(opts, ratewise.WithStore(store), ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 1}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{}))
	case "cooldown":
		opts = append(opts, ratewise.WithPause(ratewise.PausePolicy{Store: store}),
			ratewise.WithLimit(ratewise.Limit{MinSpacing: 50 * time.Millisecond}), ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}))
	case "breaker":
		// A cooldown longer than any call may wait: an open breaker refuses.
		opts = append(opts, ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 3, Cooldown: 4 * time.Second, Store: store}),
			ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1, TotalWaitCap: time.Second, InitialDelay: time.Millisecond}))
	}
	tr := ratewise.New(stampSent{http.DefaultTransport}, opts...)
	defer tr.CloseIdleConnections()
	if at := int64(num("FLEET_START_MS")); at > 0 {
		time.Sleep(time.Until(time.UnixMilli(at)))
	}
	report := workerReport{Statuses: map[int]int{}, Errors: map[string]int{}}
	var mu sync.Mutex
	calls := make(chan struct{})
	var wg sync.WaitGroup
	for range max(num("FLEET_WORKERS"), 1) {
		wg.Go(func() {
			for range calls {
				req, _ := http.NewRequest(http.MethodGet, env("FLEET_URL"), nil)
				req.Header.Set("X-Worker", env("RATEWISE_FLEET_WORKER"))
				if h := env("FLEET_HEADER"); h != "" {
					req.Header.Set(h, "1")
				}
				resp, err := tr.RoundTrip(req)
				mu.Lock()
				report.Calls++
				report.LastReturned = time.Now().UnixNano()
				if err != nil {
					kind := "other"
					var open *ratewise.CircuitOpenError
					if errors.As(err, &open) {
						kind = "circuit-" + open.State.String()
					}
					report.Errors[kind]++
				} else {
					report.Statuses[resp.StatusCode]++
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				mu.Unlock()
			}
		})
	}
	deadline := time.Now().Add(time.Duration(num("FLEET_FOR_MS")) * time.Millisecond)
	for i := 0; i < num("FLEET_CALLS") || time.Now().Before(deadline); i++ {
		calls <- struct{}{}
	}
	close(calls)
	wg.Wait()
	_ = json.NewEncoder(os.Stdout).Encode(report)
	return 0
}

// arrival is a request the fleet's server received.
type arrival struct {
	at, sent time.Time
	worker   string
	status   int
}

// fleetServer is the API the fleet calls: a token bucket of 20 a second
// (burst 5) that answers 429 beyond it, 429 with Retry-After 3 to a request
// with X-Refuse, 503 to one with X-Fail, and counts every arrival.
type fleetServer struct {
	*httptest.Server
	mu       sync.Mutex
	lim      *rate.Limiter
	arrivals []arrival
}

func startFleetServer(t *testing.T) *fleetServer {
	f := &fleetServer{lim: rate.NewLimiter(20, 5)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		status := http.StatusOK
		switch {
		case r.Header.Get("X-Refuse") != "":
			status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", "3")
		case r.Header.Get("X-Fail") != "":
			status = http.StatusServiceUnavailable
		case !f.lim.Allow():
			status = http.StatusTooManyRequests
			w.Header().Set("Retry-After", "1")
		}
		sent, _ := strconv.ParseInt(r.Header.Get("X-Sent-At"), 10, 64)
		f.arrivals = append(f.arrivals, arrival{at: time.Now(), sent: time.Unix(0, sent), worker: r.Header.Get("X-Worker"), status: status})
		f.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fleetServer) seen() []arrival {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]arrival(nil), f.arrivals...)
}

// worker is a replica to start.
type worker struct {
	name, mode, header string
	calls, goroutines  int
	forMs              int
	startAt            time.Time
}

// startWorker starts w as its own process, and returns a function that
// waits for it and returns its report.
func startWorker(t *testing.T, redisAddr, url string, w worker) func() workerReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"RATEWISE_FLEET_WORKER="+w.name, "FLEET_REDIS="+redisAddr, "FLEET_URL="+url, "FLEET_MODE="+w.mode,
		"FLEET_PREFIX=fleet-"+t.Name()+":", "FLEET_HEADER="+w.header,
		"FLEET_CALLS="+strconv.Itoa(w.calls), "FLEET_WORKERS="+strconv.Itoa(w.goroutines), "FLEET_FOR_MS="+strconv.Itoa(w.forMs))
	if !w.startAt.IsZero() {
		cmd.Env = append(cmd.Env, "FLEET_START_MS="+strconv.FormatInt(w.startAt.UnixMilli(), 10))
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() workerReport {
		var r workerReport
		decodeErr := json.NewDecoder(out).Decode(&r)
		if err := cmd.Wait(); err != nil || decodeErr != nil {
			t.Fatalf("worker %s: %v, %v", w.name, err, decodeErr)
		}
		return r
	}
}

// TestFleetOfThreeProcessesHoldsOneLimit: three processes of four
// goroutines each, sharing a limit of 20/s in Redis (given to the Limit,
// or by WithStore with a breaker, whose calls ask Redis once), send 20
// requests a second together, within 5%, refused only in the first second.
func TestFleetOfThreeProcessesHoldsOneLimit(t *testing.T) {
	for _, mode := range []string{"limit", "store"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // each mode has its Redis, its server and its processes
			fleetHoldsOneLimit(t, mode)
		})
	}
}

// fleetCalls is what each process of the fleet sends: 120 in all, six
// seconds at 20 a second, enough to measure the rate within 1 %.
const fleetCalls = 40

func fleetHoldsOneLimit(t *testing.T, mode string) {
	srv := redistest.Start(t)
	api := startFleetServer(t)
	start := time.Now().Add(time.Second) // every process started and ready
	var waits []func() workerReport
	for i := range 3 {
		waits = append(waits, startWorker(t, srv.Addr, api.URL, worker{name: fmt.Sprint("w", i), mode: mode,
			calls: fleetCalls, goroutines: 4, startAt: start}))
	}
	for _, wait := range waits {
		if r := wait(); r.Calls != fleetCalls || r.Statuses[200] != fleetCalls {
			t.Errorf("a worker: %+v, want its %d calls answered 200", r, fleetCalls)
		}
	}
	got := api.seen()
	if len(got) != 3*fleetCalls {
		t.Fatalf("the server received %d requests, want %d", len(got), 3*fleetCalls)
	}
	first, last := got[0].at, got[len(got)-1].at
	fleetRate := float64(len(got)-1) / last.Sub(first).Seconds()
	if fleetRate < 19 || fleetRate > 21 {
		t.Errorf("the fleet sent %.2f requests a second, want 20 ± 5%%", fleetRate)
	}
	perSecond := map[int]int{}
	for _, a := range got {
		perSecond[int(a.at.Sub(first)/time.Second)]++
		if a.status == http.StatusTooManyRequests && a.at.Sub(first) > time.Second {
			t.Errorf("a 429 at %v, after the first second", a.at.Sub(first))
		}
	}
	t.Logf("fleet rate %.2f/s over %v; arrivals per second %v", fleetRate, last.Sub(first).Round(time.Millisecond), perSecond)
}

func TestFleetPausesTogether(t *testing.T) {
	srv := redistest.Start(t)
	api := startFleetServer(t)
	start := time.Now().Add(time.Second)
	b := startWorker(t, srv.Addr, api.URL, worker{name: "b", mode: "cooldown", goroutines: 1, forMs: 5000, startAt: start})
	c := startWorker(t, srv.Addr, api.URL, worker{name: "c", mode: "cooldown", goroutines: 1, forMs: 5000, startAt: start})
	a := startWorker(t, srv.Addr, api.URL, worker{name: "a", mode: "cooldown", header: "X-Refuse", calls: 1,
		startAt: start.Add(time.Second)})
	ra := a()
	if ra.Statuses[429] != 1 {
		t.Fatalf("a: %+v, want its one 429", ra)
	}
	b()
	c()
	// The pause is in Redis from when a's call returned at the latest. A
	// worker's request already past the pause check by then may still be
	// sent (it waits its MinSpacing first): one per worker, as each calls
	// from one goroutine. Any other request sent while the pause held was
	// sent through it. Judging by when requests were sent, not by a fixed
	// grace after the 429, keeps the test true on a loaded machine.
	known := time.Unix(0, ra.LastReturned)
	var refusedAt time.Time
	for _, x := range api.seen() {
		if x.worker == "a" {
			refusedAt = x.at
		}
	}
	if known.Before(refusedAt) {
		t.Fatalf("a's call returned at %v, before the server refused it at %v", known, refusedAt)
	}
	var before, after int
	late := map[string][]time.Duration{}
	for _, x := range api.seen() {
		switch {
		case x.worker == "a":
		case x.sent.Before(known):
			before++
		case x.sent.Before(refusedAt.Add(3 * time.Second)):
			late[x.worker] = append(late[x.worker], x.sent.Sub(known).Round(time.Millisecond))
		default:
			after++
		}
	}
	for w, sent := range late {
		if len(sent) > 1 {
			t.Errorf("%s sent %d requests during a's pause of 3s after it was shared (the first %v after), want at most the one already admitted",
				w, len(sent), sent[:min(len(sent), 3)])
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("b and c sent %d requests before the pause and %d after, want some of each", before, after)
	}
	t.Logf("a's pause was shared %v after the server's 429", known.Sub(refusedAt).Round(time.Millisecond))
}

// TestFleetSharesABreakerAcrossRestarts spends most of its time waiting
// out the 4 s cooldown, and holds states (open, then closed by the probe),
// not a time or a rate: it runs in parallel, beside the cluster's test.
func TestFleetSharesABreakerAcrossRestarts(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	api := startFleetServer(t)
	// a fails three times in a row: the breaker trips for 4s.
	if r := startWorker(t, srv.Addr, api.URL, worker{name: "a", mode: "breaker", header: "X-Fail", calls: 3})(); r.Statuses[503] != 3 {
		t.Fatalf("a: %+v, want 3 failures", r)
	}
	trippedAt := time.Now()
	// b, another process, is refused without sending anything.
	if r := startWorker(t, srv.Addr, api.URL, worker{name: "b", mode: "breaker", calls: 1})(); r.Errors["circuit-open"] != 1 {
		t.Errorf("b: %+v, want its call refused by the open breaker", r)
	}
	// a, started again, still finds it open.
	if r := startWorker(t, srv.Addr, api.URL, worker{name: "a2", mode: "breaker", calls: 1})(); r.Errors["circuit-open"] != 1 {
		t.Errorf("a after a restart: %+v, want the breaker still open", r)
	}
	for _, x := range api.seen() {
		if x.worker != "a" {
			t.Errorf("%s sent a request while the breaker was open", x.worker)
		}
	}
	// Once the cooldown is over, the next call is the probe, and closes it.
	time.Sleep(time.Until(trippedAt.Add(4*time.Second + 100*time.Millisecond)))
	if r := startWorker(t, srv.Addr, api.URL, worker{name: "b2", mode: "breaker", calls: 2})(); r.Statuses[200] != 2 {
		t.Errorf("b after the cooldown: %+v, want the probe and the next call through", r)
	}
}
