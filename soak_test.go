package ratewise_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/composite"
	"github.com/ratewise/ratewise/ratewisetest"
)

// soakFor runs TestSoak for a set time instead of its bounded count of
// calls: go test -run TestSoak -soak=10m .
var soakFor = flag.Duration("soak", 0, "run TestSoak for this long (such as 10m) instead of its bounded default")

// soakSeed replays a run's faults: every run logs its seed.
var soakSeed = flag.Uint64("soak.seed", 0, "the seed of TestSoak's faults; 0 draws one")

// The soak's shape. Its default run, in make test, makes soakCalls
// calls, a few seconds of work; make soak runs it for minutes (-soak).
// Every bound below is far from what a correct stack needs, so a breach
// is a bug, not a slow machine.
const (
	soakCalls    = 1000
	soakWorkers  = 32
	soakHosts    = 12 // the first one is flaky: its handler fails most calls
	soakWaitCap  = 2 * time.Second
	soakDeadline = 8 * time.Second
	soakWallTime = 15 * time.Second
	// soakSlack is how late a rule may be seen to hold: a request let
	// through a gate a moment before another goroutine paused it is sent
	// after the pause began, and a loaded machine's scheduler (the race
	// detector's, other tests') stretches every step; a second, so that a
	// breach is the stack's, not the scheduler's.
	soakSlack = time.Second
)

// The secrets every soak request carries, which nothing the transport
// reports may show.
var (
	soakAPIKey = "soak-apikey-" + randomHex()
	soakBearer = "soak-bearer-" + randomHex()
	soakToken  = "soak-token-" + randomHex()
)

func randomHex() string {
	var b [12]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}

// TestSoak drives thousands of calls from many goroutines through the whole
// stack (limit, pause gate, retry, breaker) against a loopback server
// that answers with a scripted mix of faults: 429s with and without a
// hint, 503s, resets before and after the headers, truncated and slow
// bodies, and random latency. Over the whole run it checks that every call
// ends in time with a response or a typed error, that nothing leaks
// (goroutines, bodies, connections), that every body reaches the server
// intact on every attempt, that the rules hold (the wait budget, no retry
// of a non-idempotent request after a network error, nothing sent into an
// open breaker or a running cooldown), and that no secret shows in a log
// line, an error, an envelope or a metric.
func TestSoak(t *testing.T) {
	s := newSoak(t)
	s.run(t)
	s.check(t)
}

// soak is one run: the server, the instrumented stack and what was seen.
type soak struct {
	srv   *ratewisetest.Server
	conns *countingDialer
	base  *countingBase
	tr    *ratewise.Transport
	obs   *soakObserver
	logs  lockedBuffer

	// Counted by the server's OnRequest, per attempt that reached it.
	bodiesChecked, bodiesCorrupt atomic.Int64

	mu       sync.Mutex
	outcomes map[string]int
	problems []string // rule breaches, kept to show the first ones
	reported []string // every error string and envelope produced
	calls    int

	peakGoroutines int
	peakHeap       uint64
}

func newSoak(t *testing.T) *soak {
	s := &soak{outcomes: map[string]int{}, obs: &soakObserver{}}
	flaky := soakHost(0)
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("soak seed %d (replay with -soak.seed=%d)", seed, seed)
	s.srv = ratewisetest.NewServer(ratewisetest.Config{
		// The server's own bucket is well above the client's limits: its
		// 429s come from the injected faults and from bursts.
		Rate: 800, Burst: 80,
		PublishHeaders: true,
		Latency:        time.Millisecond,
		LatencyJitter:  8 * time.Millisecond,
		FaultRate:      0.1,
		// Drawn uniformly from this list, so a 429 with its two-second
		// pause is rarer than the rest: it stops a whole key.
		Faults: []ratewisetest.Fault{
			ratewisetest.Fault429,
			ratewisetest.Fault429NoHint, ratewisetest.Fault429NoHint, ratewisetest.Fault429NoHint,
			ratewisetest.Fault503, ratewisetest.Fault503, ratewisetest.Fault503,
			ratewisetest.FaultReset, ratewisetest.FaultReset, ratewisetest.FaultReset,
			ratewisetest.FaultResetAfterHeaders, ratewisetest.FaultResetAfterHeaders, ratewisetest.FaultResetAfterHeaders,
			ratewisetest.FaultTruncatedBody, ratewisetest.FaultTruncatedBody, ratewisetest.FaultTruncatedBody,
			ratewisetest.FaultSlowBody, ratewisetest.FaultSlowBody, ratewisetest.FaultSlowBody,
		},
		// Above a second: with a paced scope, the pace answers shorter
		// hints, not the gate.
		FaultRetryAfter: 2 * time.Second,
		SlowBodyDelay:   10 * time.Millisecond,
		Seed:            seed,
		OnRequest:       s.checkBody,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.Header.Get("X-Soak-Call"))
			if r.Host == flaky && n%5 != 0 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			// The answer names the call and the body's checksum, so the
			// caller can tell its own answer, whole, from anything else.
			_, _ = fmt.Fprintf(w, "call=%d sha=%s", n, r.Header.Get("X-Body-SHA256"))
		}),
	})
	t.Cleanup(s.srv.Close)

	s.conns = &countingDialer{addr: strings.TrimPrefix(s.srv.URL, "http://")}
	s.base = &countingBase{
		base:       &http.Transport{DialContext: s.conns.DialContext, MaxIdleConnsPerHost: 4},
		netErrored: map[string]bool{},
	}
	logger := slog.New(slog.NewJSONHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.tr = ratewise.New(s.base,
		ratewise.WithRetry(ratewise.RetryPolicy{
			MaxAttempts:    4,
			InitialDelay:   50 * time.Millisecond,
			MaxDelay:       500 * time.Millisecond,
			TotalWaitCap:   soakWaitCap,
			NetworkRetries: 2,
		}),
		ratewise.WithLimit(ratewise.Limit{Name: "per host", Rate: 40, Burst: 4, MaxConcurrent: 6}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{
			ConsecutiveFailures: 4,
			Cooldown:            time.Second,
			Escalation:          []time.Duration{time.Second, 2 * time.Second},
		}),
		ratewise.WithTrace(s.obs.trace()),
		ratewise.WithLogger(logger),
	)
	return s
}

func soakHost(i int) string {
	if i == 0 {
		return "flaky.soak.test"
	}
	return fmt.Sprintf("api-%02d.soak.test", i)
}

// run makes the calls: soakCalls of them, or as many as fit in -soak.
func (s *soak) run(t *testing.T) {
	stopSampling := s.sample()
	defer stopSampling()

	var next atomic.Int64
	// The default run also stops at soakWallTime, on however slow a
	// machine, so that it stays inside make test's time.
	end := time.Now().Add(soakWallTime)
	if *soakFor > 0 {
		end = time.Now().Add(*soakFor)
	}
	more := func() (int, bool) {
		n := int(next.Add(1)) - 1
		return n, time.Now().Before(end) && (*soakFor > 0 || n < soakCalls)
	}
	client := &http.Client{Transport: s.tr}
	var wg sync.WaitGroup
	for range soakWorkers {
		wg.Go(func() {
			for n, ok := more(); ok; n, ok = more() {
				if n%25 == 24 {
					s.fanOut(client, n)
				} else {
					s.call(client, n)
				}
			}
		})
	}
	wg.Wait()
}

// soakRequest builds call n: its method, its body (and whether the body
// can be replayed) and the secrets.
func soakRequest(ctx context.Context, n int) (*http.Request, []byte) {
	methods := []string{http.MethodGet, http.MethodGet, http.MethodPost, http.MethodPost, http.MethodPut}
	method := methods[n%len(methods)]
	u := fmt.Sprintf("http://%s/items/%d?token=%s&n=%d", soakHost(n%soakHosts), n, soakToken, n)
	var body []byte
	if method != http.MethodGet {
		r := rand.New(rand.NewPCG(uint64(n), 7))
		body = make([]byte, r.IntN(4096))
		for i := range body {
			body[i] = byte(r.Uint32())
		}
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
		if n%40 == 2 {
			// A stream of unknown length: it can be sent once only.
			reader = io.NopCloser(bytes.NewReader(body))
		}
	}
	req, _ := http.NewRequestWithContext(ctx, method, u, reader)
	sum := sha256.Sum256(body)
	req.Header.Set("X-Soak-Call", strconv.Itoa(n))
	req.Header.Set("X-Body-SHA256", hex.EncodeToString(sum[:]))
	req.Header.Set("Authorization", "Bearer "+soakBearer)
	req.Header.Set("Apikey", soakAPIKey)
	if n%15 == 3 { // a POST that says it may be repeated
		req.Header.Set("Idempotency-Key", "idem-"+strconv.Itoa(n))
	}
	return req, body
}

// call makes call n through client and records how it ended.
func (s *soak) call(client *http.Client, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), soakDeadline)
	defer cancel()
	ctx, stats := ratewise.WithCallStats(ctx)
	req, _ := soakRequest(ctx, n)
	before := req.Header.Clone()
	beforeURL := req.URL.String()

	start := time.Now()
	resp, err := client.Do(req)
	outcome := s.outcome(n, req, resp, err)
	took := time.Since(start)

	var problems []string
	if took >= soakDeadline {
		problems = append(problems, fmt.Sprintf("call %d took %v, past its deadline", n, took))
	}
	if w := stats.Waited(); w > soakWaitCap+soakSlack {
		problems = append(problems, fmt.Sprintf("call %d waited %v, past the %v budget", n, w, soakWaitCap))
	}
	if !maps.EqualFunc(before, req.Header, slices.Equal) || req.URL.String() != beforeURL {
		problems = append(problems, fmt.Sprintf("call %d: the request was changed", n))
	}
	s.record(outcome, problems)
}

// outcome reads the result of one call, closing its body, and names the
// way it ended.
func (s *soak) outcome(n int, req *http.Request, resp *http.Response, err error) string {
	if err != nil {
		var urlErr *url.Error
		inner := err
		if errors.As(err, &urlErr) {
			// net/http's url.Error quotes the URL, query and all: the
			// caller redacts it, as Redact's documentation says.
			s.report(ratewise.Redact(err.Error(), req))
			inner = urlErr.Err
		}
		s.report(inner.Error())
		var open *ratewise.CircuitOpenError
		var limited *ratewise.ClientLimitError
		var netErr net.Error
		switch {
		case errors.As(inner, &open):
			return "error: circuit open"
		case errors.As(inner, &limited):
			return "error: limited"
		case errors.Is(inner, ratewise.ErrBudgetExhausted):
			return "error: budget"
		case errors.Is(inner, context.DeadlineExceeded):
			return "error: deadline (a hang)"
		case errors.As(inner, &netErr), errors.Is(inner, io.EOF), errors.Is(inner, io.ErrUnexpectedEOF):
			return "error: network"
		}
		return "error: untyped: " + fmt.Sprintf("%T", inner)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(resp.Body)
	switch {
	case readErr != nil:
		return "response: body broken"
	case resp.StatusCode == http.StatusOK:
		want := fmt.Sprintf("call=%d sha=%s", n, req.Header.Get("X-Body-SHA256"))
		if string(body) != want && !strings.HasPrefix(string(body), "ratewisetest fault body") {
			return fmt.Sprintf("response: 200 with a wrong body %.60q", body)
		}
		return "response: 200"
	}
	if err := ratewise.CheckResponse(resp); err != nil {
		s.report(err.Error())
	}
	return "response: final " + strconv.Itoa(resp.StatusCode)
}

// fanOut runs three calls as a composite, sharing one budget, and reports
// its envelope.
func (s *soak) fanOut(client *http.Client, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), soakDeadline)
	defer cancel()
	branch := func(name string, call int) composite.Branch {
		return composite.Branch{Name: name, Call: func(ctx context.Context) error {
			req, _ := soakRequest(ctx, call)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return ratewise.CheckResponse(resp)
		}}
	}
	start := time.Now()
	res, err := composite.Run(ctx, branch("card", n), []composite.Branch{branch("comments", n+1), branch("subtasks", n+2)},
		composite.Options{Budget: soakWaitCap})
	var problems []string
	if took := time.Since(start); took >= soakDeadline {
		problems = append(problems, fmt.Sprintf("fan-out %d took %v", n, took))
	}
	if res.BudgetSpent > soakWaitCap+soakSlack {
		problems = append(problems, fmt.Sprintf("fan-out %d spent %v, past its shared %v budget", n, res.BudgetSpent, soakWaitCap))
	}
	envelope, _ := json.Marshal(res)
	s.report(string(envelope), fmt.Sprintf("%+v", res))
	outcome := "fan-out: complete"
	if err != nil {
		s.report(err.Error())
		outcome = "fan-out: primary failed"
	} else if len(res.Failed()) > 0 {
		outcome = "fan-out: partial"
	}
	s.record(outcome, problems)
}

func (s *soak) record(outcome string, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.outcomes[outcome]++
	s.problems = append(s.problems, problems...)
}

// report keeps text the caller may log or show, for the secrets scan.
func (s *soak) report(texts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reported = append(s.reported, texts...)
}

// sample records the peak goroutine count and heap until stopped.
func (s *soak) sample() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	heap := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(heap)
			s.mu.Lock()
			s.peakGoroutines = max(s.peakGoroutines, runtime.NumGoroutine())
			s.peakHeap = max(s.peakHeap, heap[0].Value.Uint64())
			s.mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
