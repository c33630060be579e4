package ratewisetest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
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
