package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/ratewisetest"
)

// Loopback is the scenario's server on 127.0.0.1: ratewisetest's.
type Loopback struct {
	srv       *ratewisetest.Server
	transport *http.Transport
}

// NewLoopback starts the server for s, with a transport that keeps enough
// connections for the workers.
func NewLoopback(s Scenario) *Loopback {
	srv := ratewisetest.NewServer(ratewisetest.Config{Rate: s.Rate, Burst: s.Burst, Latency: s.Latency,
		PublishHeaders: s.Headers, IETFHeaders: s.Headers})
	t := srv.Client().Transport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = s.Workers*2, s.Workers*2
	return &Loopback{srv: srv, transport: t}
}

// URL returns the server's base URL.
func (l *Loopback) URL() string { return l.srv.URL }

// Transport returns the transport to reach it.
func (l *Loopback) Transport() http.RoundTripper { return l.transport }

// Stats returns the requests received and refused.
func (l *Loopback) Stats() (int, int) {
	st := l.srv.Stats()
	return st.Received, st.Limited
}

// Close stops the server.
func (l *Loopback) Close() {
	l.transport.CloseIdleConnections()
	l.srv.Close()
}

// InProcess is the scenario's server as an http.RoundTripper that answers
// in the caller's goroutine: no network, so it runs inside a
// testing/synctest bubble, where a ten-second scenario takes no time. It
// keeps the same token bucket and headers as ratewisetest's server.
type InProcess struct {
	s       Scenario
	mu      sync.Mutex
	lim     *rate.Limiter // guarded by mu
	recv    int           // guarded by mu
	refused int           // guarded by mu
}

// NewInProcess returns the in-process server for s.
func NewInProcess(s Scenario) *InProcess {
	return &InProcess{s: s, lim: rate.NewLimiter(rate.Limit(s.Rate), s.Burst)}
}

// URL returns a base URL the transport answers for.
func (p *InProcess) URL() string { return "http://api.bench.test" }

// Transport returns p itself.
func (p *InProcess) Transport() http.RoundTripper { return p }

// Stats returns the requests received and refused.
func (p *InProcess) Stats() (int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recv, p.refused
}

// Close does nothing: there is nothing to stop.
func (p *InProcess) Close() {}

// RoundTrip answers a request as the token bucket says.
func (p *InProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if p.s.Latency > 0 {
		if err := sleep(req.Context(), p.s.Latency); err != nil {
			return nil, err
		}
	}
	p.mu.Lock()
	p.recv++
	now := time.Now()
	ok := p.lim.AllowN(now, 1)
	tokens := math.Max(p.lim.TokensAt(now), 0)
	if !ok {
		p.refused++
	}
	p.mu.Unlock()

	h := http.Header{}
	if p.s.Headers {
		untilFull := (float64(p.s.Burst) - tokens) / p.s.Rate
		untilOne := math.Max(1-tokens, 0) / p.s.Rate
		remaining := int(tokens)
		reset := untilFull
		if remaining == 0 {
			reset = untilOne
		}
		h.Set("X-RateLimit-Limit", strconv.Itoa(p.s.Burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.Itoa(int(math.Ceil(untilFull))))
		h.Set("RateLimit", `"default";r=`+strconv.Itoa(remaining)+";t="+strconv.Itoa(int(math.Ceil(reset))))
	}
	status, body := http.StatusOK, "ok"
	if !ok {
		status, body = http.StatusTooManyRequests, `{"error":"rate limited"}`
		h.Set("Retry-After", strconv.Itoa(max(int(math.Ceil((1-tokens)/p.s.Rate)), 1)))
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Request: req,
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
