package ratewisetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// noReuse returns a client that opens a connection per request, so that
// http.Transport never retries a request reset on a reused connection.
func noReuse() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

func TestFault503(t *testing.T) {
	s := newServer(t, Config{FaultRate: 1, Faults: []Fault{Fault503}})
	r := get(t, s.Client(), s.URL, "", "")
	if r.status != 503 || r.body != "" {
		t.Errorf("GET = %d %q, want 503 with an empty body", r.status, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After = %q, want none", got)
	}
	if got, want := s.Stats(), (Stats{Received: 1, Faults: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestFaultReset(t *testing.T) {
	s := newServer(t, Config{FaultRate: 1, Faults: []Fault{FaultReset}})
	resp, err := noReuse().Get(s.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET = %s, want a network error", resp.Status)
	}
	if got, want := s.Stats(), (Stats{Received: 1, Faults: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestFaultsOnlyOnAdmittedRequests(t *testing.T) {
	s := newServer(t, Config{Rate: 0.5, Burst: 1, FaultRate: 1, Faults: []Fault{Fault503}})
	if got, want := statuses(getN(t, s, 2)), []int{503, 429}; !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want %v", got, want)
	}
	if got, want := s.Stats(), (Stats{Received: 2, Limited: 1, Faults: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestEmptyFaultsMeansAll(t *testing.T) {
	s := newServer(t, Config{FaultRate: 1})
	c := noReuse()
	var resets, unavailable int
	for range 30 {
		resp, err := c.Get(s.URL)
		if err != nil {
			resets++
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == 503 {
			unavailable++
		}
	}
	if resets == 0 || unavailable == 0 {
		t.Errorf("30 requests with every fault gave %d resets and %d 503s, want some of each", resets, unavailable)
	}
}

// faultSequence sends n requests to a server with cfg and returns their
// statuses.
func faultSequence(t *testing.T, cfg Config, n int) []int {
	t.Helper()
	s := newServer(t, cfg)
	return statuses(getN(t, s, n))
}

func TestFaultSeed(t *testing.T) {
	cfg := Config{FaultRate: 0.5, Faults: []Fault{Fault503}, Seed: 42}
	first := faultSequence(t, cfg, 50)
	second := faultSequence(t, cfg, 50)
	if !slices.Equal(first, second) {
		t.Errorf("two servers with Seed 42 gave\n%v\n%v\nwant the same sequence", first, second)
	}
	faults := 0
	for _, c := range first {
		if c == 503 {
			faults++
		}
	}
	if faults == 0 || faults == 50 {
		t.Errorf("FaultRate 0.5 gave %d faults in 50 requests, want some but not all", faults)
	}

	cfg.Seed = 43
	if other := faultSequence(t, cfg, 50); slices.Equal(first, other) {
		t.Errorf("Seeds 42 and 43 gave the same sequence %v, want different ones", first)
	}
	// Jitter draws from its own stream, so it does not move the faults.
	cfg.Seed, cfg.LatencyJitter = 42, time.Microsecond
	if jittered := faultSequence(t, cfg, 50); !slices.Equal(first, jittered) {
		t.Errorf("adding jitter changed the fault sequence of Seed 42:\n%v\n%v", first, jittered)
	}
}

func TestLatency(t *testing.T) {
	const latency = 5 * time.Millisecond
	s := newServer(t, Config{Latency: latency, LatencyJitter: 2 * time.Millisecond, Rate: 0.5, Burst: 1})
	for _, want := range []int{200, 429} {
		start := time.Now()
		r := get(t, s.Client(), s.URL, "", "")
		if took := time.Since(start); took < latency {
			t.Errorf("a %d took %v, want at least the %v latency", r.status, took, latency)
		}
		if r.status != want {
			t.Errorf("status = %d, want %d", r.status, want)
		}
	}
}

// closeWithin fails the test unless s.Close returns within d.
func closeWithin(t *testing.T, s *Server, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close did not return within %v", d)
	}
}

func TestLatencyCancelledByContext(t *testing.T) {
	s := NewServer(Config{Latency: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := s.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET with a 20ms deadline against 10s latency = %s, want an error", resp.Status)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GET error = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("GET took %v, want it cut short by the 20ms deadline", took)
	}
	closeWithin(t, s, 2*time.Second)
	if got, want := s.Stats(), (Stats{Received: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestCloseCutsLatencyShort(t *testing.T) {
	s := NewServer(Config{Latency: 10 * time.Second})
	errc := make(chan error, 1)
	go func() {
		resp, err := s.Client().Get(s.URL)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	deadline := time.Now().Add(2 * time.Second)
	for s.Stats().Received == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the server within 2s")
		}
		time.Sleep(time.Millisecond)
	}
	closeWithin(t, s, 2*time.Second)
	select {
	case err := <-errc:
		if err == nil {
			t.Errorf("GET cut short by Close = a response, want an error")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("GET did not return within 2s of Close")
	}
}

// bodyFaultCase is what a client should see for one fault, over the
// network and in process.
type bodyFaultCase struct {
	fault      Fault
	status     int    // 0: no response at all
	retryAfter string // the Retry-After header wanted
	body       string // what can be read before the body ends
	readErr    func(error) bool
}

func bodyFaultCases() []bodyFaultCase {
	isNil := func(err error) bool { return err == nil }
	return []bodyFaultCase{
		{fault: Fault429, status: 429, retryAfter: "3", body: limitedBody, readErr: isNil},
		{fault: Fault429NoHint, status: 429, body: limitedBody, readErr: isNil},
		{fault: FaultResetAfterHeaders, status: 200, body: faultBody[:FaultBodySize/2], readErr: func(err error) bool {
			return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{fault: FaultTruncatedBody, status: 200, body: faultBody[:FaultBodySize/2], readErr: func(err error) bool {
			return errors.Is(err, io.ErrUnexpectedEOF)
		}},
		{fault: FaultSlowBody, status: 200, body: faultBody, readErr: isNil},
	}
}

// checkBodyFault sends one request through rt and checks it against c.
func checkBodyFault(t *testing.T, rt http.RoundTripper, url string, c bodyFaultCase) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("%v: RoundTrip error %v, want a %d", c.fault, err, c.status)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != c.status || resp.Header.Get("Retry-After") != c.retryAfter {
		t.Errorf("%v: %d Retry-After %q, want %d %q", c.fault, resp.StatusCode, resp.Header.Get("Retry-After"), c.status, c.retryAfter)
	}
	if string(body) != c.body || !c.readErr(err) {
		t.Errorf("%v: read %d bytes, err %v; want %d bytes", c.fault, len(body), err, len(c.body))
	}
}

func TestBodyFaultsOverTheNetwork(t *testing.T) {
	for _, c := range bodyFaultCases() {
		s := newServer(t, Config{FaultRate: 1, Faults: []Fault{c.fault}, FaultRetryAfter: 3 * time.Second})
		checkBodyFault(t, noReuse().Transport, s.URL, c)
		if got, want := s.Stats(), (Stats{Received: 1, Faults: 1}); got != want {
			t.Errorf("%v: Stats() = %+v, want %+v", c.fault, got, want)
		}
	}
}

func TestBodyFaultsInProcess(t *testing.T) {
	for _, c := range bodyFaultCases() {
		b := NewBucket(Config{FaultRate: 1, Faults: []Fault{c.fault}, FaultRetryAfter: 3 * time.Second})
		if c.fault == FaultResetAfterHeaders {
			c.readErr = func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
		}
		checkBodyFault(t, b, "http://api.test/", c)
	}
}

func TestSlowBodyTakesItsDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{FaultRate: 1, Faults: []Fault{FaultSlowBody}, SlowBodyDelay: time.Second})
		start := time.Now()
		checkBodyFault(t, b, "http://api.test/", bodyFaultCase{fault: FaultSlowBody, status: 200, body: faultBody, readErr: func(err error) bool { return err == nil }})
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("four pieces a second apart took %v, want 3s", got)
		}
	})
}

func TestOnRequestSeesEveryBodyAndLeavesItReadable(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	s := newServer(t, Config{Rate: 0.001, Burst: 1, Handler: echo, OnRequest: func(r *http.Request, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Method+" "+string(body))
	}})
	for _, give := range []string{"first", "second"} {
		resp, err := noReuse().Post(s.URL, "text/plain", strings.NewReader(give))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if give == "first" && string(got) != give {
			t.Errorf("handler read %q, want %q", got, give)
		}
	}
	// The second request is refused by the bucket, yet it was seen.
	if want := []string{"POST first", "POST second"}; !slices.Equal(seen, want) {
		t.Errorf("OnRequest saw %q, want %q", seen, want)
	}
}
