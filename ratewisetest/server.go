package ratewisetest

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// defaultSeed is what a zero Config.Seed means: fixed, so runs repeat.
const defaultSeed = 0x5eed

// limitedBody is the body of every 429.
const limitedBody = `{"error":"rate limited"}`

// Stats counts what a [Server] did. Every request is Received; it then ends
// in exactly one of Admitted (passed to the handler), Limited (answered
// 429) or Faults (given an injected fault), unless it was abandoned during
// the latency, which only Received counts.
type Stats struct {
	Received int `json:"received"` // Received counts every request.
	Admitted int `json:"admitted"` // Admitted counts requests passed to the handler.
	Limited  int `json:"limited"`  // Limited counts requests answered 429.
	Faults   int `json:"faults"`   // Faults counts injected faults.
}

// Server is a fake rate-limited HTTP server listening on 127.0.0.1, built on
// [httptest.Server]. Create it with [NewServer] and stop it with
// [Server.Close]. A Server is safe for concurrent use.
//
// Each request waits out the configured latency first, then meets its
// token bucket: a request abandoned during the latency never reached the
// "application", so it takes no token.
type Server struct {
	// URL is the base URL of the server, of the form http://127.0.0.1:port,
	// with no trailing slash.
	URL string

	cfg     Config
	burst   int
	faults  []Fault
	handler http.Handler
	policy  string // RateLimit-Policy value, the same on every response
	ts      *httptest.Server

	done      chan struct{} // closed by Close to cut latency waits short
	closeOnce sync.Once

	received, admitted, limited, faulted atomic.Int64

	mu         sync.Mutex
	buckets    map[string]*rate.Limiter // guarded by mu
	arrivals   []time.Time              // guarded by mu
	faultRand  *rand.Rand               // guarded by mu
	jitterRand *rand.Rand               // guarded by mu
}

// NewServer starts a server described by cfg on 127.0.0.1. It panics with
// the error of [Config.Validate] when cfg is invalid, and, like
// [httptest.NewServer], when it cannot listen on loopback.
func NewServer(cfg Config) *Server {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	// Own copies, so the caller changing its slice later cannot race us.
	cfg.Faults = slices.Clone(cfg.Faults)
	seed := cfg.Seed
	if seed == 0 {
		seed = defaultSeed
	}
	s := &Server{
		cfg:     cfg,
		burst:   cfg.burst(),
		faults:  cfg.faults(),
		handler: cfg.Handler,
		done:    make(chan struct{}),
		buckets: make(map[string]*rate.Limiter),
		// Separate streams, so changing the jitter does not change which
		// requests get faults.
		faultRand:  rand.New(rand.NewPCG(seed, 1)),
		jitterRand: rand.New(rand.NewPCG(seed, 2)),
	}
	if s.handler == nil {
		s.handler = http.HandlerFunc(okHandler)
	}
	if cfg.Rate > 0 {
		full := ceilSeconds(fromSeconds(float64(s.burst) / cfg.Rate))
		s.policy = `"default";q=` + strconv.Itoa(s.burst) + ";w=" + strconv.FormatInt(max(full, 1), 10)
	}

	// Listen ourselves rather than through httptest.NewServer, which may
	// pick [::1] or an address from the -httptest.serve flag.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("ratewisetest: cannot listen on 127.0.0.1: %v", err))
	}
	s.ts = &httptest.Server{
		Listener: l,
		Config:   &http.Server{Handler: http.HandlerFunc(s.serve)},
	}
	s.ts.Start()
	s.URL = s.ts.URL
	return s
}

// Close cuts short every latency wait, then shuts the server down and
// waits for the requests in flight to finish. It may be called more than
// once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.ts.Close()
}

// Client returns an [http.Client] configured for the server. Its idle
// connections are closed by [Server.Close].
func (s *Server) Client() *http.Client {
	return s.ts.Client()
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Received: int(s.received.Load()),
		Admitted: int(s.admitted.Load()),
		Limited:  int(s.limited.Load()),
		Faults:   int(s.faulted.Load()),
	}
}

// Arrivals returns when each request arrived, in order, for checking how a
// client paces its requests. The slice is a copy.
func (s *Server) Arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.arrivals)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.received.Add(1)
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	jitter := s.drawJitter()
	s.mu.Unlock()

	if !s.sleep(r.Context(), s.cfg.Latency+jitter) {
		// The client is gone or the server is closing: drop the connection
		// rather than let net/http send an empty 200.
		panic(http.ErrAbortHandler)
	}
	if s.cfg.Rate == 0 {
		s.admit(w, r)
		return
	}

	var key string
	if s.cfg.KeyHeader != "" {
		key = r.Header.Get(s.cfg.KeyHeader)
	}
	v, now := s.take(key)
	s.setHeaders(w.Header(), v)
	if v.admitted {
		s.admit(w, r)
		return
	}
	s.limited.Add(1)
	h := w.Header()
	if ra := retryAfter(s.cfg.RetryAfter, now, v.untilOne); ra != "" {
		h.Set("Retry-After", ra)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, limitedBody)
}

// sleep waits d and reports whether it did, rather than being cut short by
// ctx or by Close.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// admit answers a request that passed the bucket, with a fault or the
// handler.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) {
	f, ok := s.drawFault()
	if !ok {
		s.admitted.Add(1)
		s.handler.ServeHTTP(w, r)
		return
	}
	s.faulted.Add(1)
	switch f {
	case Fault503:
		w.WriteHeader(http.StatusServiceUnavailable)
	case FaultReset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			// Cannot hijack (HTTP/2): aborting is the closest to a reset.
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			// Linger 0 makes Close send RST instead of FIN.
			_ = tc.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// drawJitter returns the extra latency of one request. s.mu must be held.
func (s *Server) drawJitter() time.Duration {
	j := int64(s.cfg.LatencyJitter)
	if j <= 0 {
		return 0
	}
	if j < math.MaxInt64 {
		j++ // "up to" includes the bound
	}
	return time.Duration(s.jitterRand.Int64N(j))
}

// drawFault reports whether an admitted request gets a fault, and which.
func (s *Server) drawFault() (Fault, bool) {
	if s.cfg.FaultRate == 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.faultRand.Float64() >= s.cfg.FaultRate {
		return 0, false
	}
	return s.faults[s.faultRand.IntN(len(s.faults))], true
}

// verdict is what a bucket said about one request.
type verdict struct {
	admitted  bool
	remaining int           // whole tokens left after the request
	untilOne  time.Duration // until at least one token is available
	untilFull time.Duration // until the bucket is full
}

// take asks the bucket of key for one token, and returns the verdict and
// the time it was made.
func (s *Server) take(key string) (verdict, time.Time) {
	// One lock around the whole decision, so the headers describe the same
	// bucket state that admitted or refused the request.
	s.mu.Lock()
	defer s.mu.Unlock()
	lim, ok := s.buckets[key]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(s.cfg.Rate), s.burst)
		s.buckets[key] = lim
	}
	now := time.Now()
	// AllowN takes nothing when it refuses, so a 429 costs no token.
	ok = lim.AllowN(now, 1)
	v := bucketState(lim.TokensAt(now), s.cfg.Rate, s.burst)
	v.admitted = ok
	return v, now
}

// setHeaders adds the configured rate-limit headers for v to h.
func (s *Server) setHeaders(h http.Header, v verdict) {
	if s.cfg.PublishHeaders {
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(v.remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilSeconds(v.untilFull), 10))
	}
	if s.cfg.IETFHeaders {
		t := v.untilFull
		if v.remaining == 0 {
			t = v.untilOne
		}
		h.Set("RateLimit-Policy", s.policy)
		h.Set("RateLimit", `"default";r=`+strconv.Itoa(v.remaining)+";t="+strconv.FormatInt(ceilSeconds(t), 10))
	}
}

// bucketState describes a bucket holding tokens, refilled at perSecond up
// to burst.
func bucketState(tokens, perSecond float64, burst int) verdict {
	tokens = max(tokens, 0)
	v := verdict{remaining: int(math.Floor(tokens))}
	if tokens < 1 {
		v.untilOne = fromSeconds((1 - tokens) / perSecond)
	}
	if b := float64(burst); tokens < b {
		v.untilFull = fromSeconds((b - tokens) / perSecond)
	}
	return v
}

// retryAfter returns the Retry-After value telling a client refused at now
// to come back after wait, or "" for none.
func retryAfter(mode RetryAfterMode, now time.Time, wait time.Duration) string {
	switch mode {
	case RetryAfterSeconds:
		return strconv.FormatInt(max(ceilSeconds(wait), 1), 10)
	case RetryAfterHTTPDate:
		return roundUpSecond(now.Add(wait)).UTC().Format(http.TimeFormat)
	}
	return ""
}

// fromSeconds converts seconds to a duration, rounding up to the
// nanosecond so that later rounding to seconds never comes out short.
func fromSeconds(sec float64) time.Duration {
	return time.Duration(math.Ceil(sec * float64(time.Second)))
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// roundUpSecond returns t rounded up to a whole second.
func roundUpSecond(t time.Time) time.Time {
	r := t.Truncate(time.Second)
	if r.Before(t) {
		r = r.Add(time.Second)
	}
	return r
}

func okHandler(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok")
}
