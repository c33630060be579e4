package bench

import (
	"net/http"

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
	srv := ratewisetest.NewServer(config(s))
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
// in the caller's goroutine (ratewisetest's Bucket): no network, so it
// runs inside a testing/synctest bubble, where a ten-second scenario
// takes no time. It keeps the same token bucket and headers as the
// loopback server.
type InProcess struct {
	b *ratewisetest.Bucket
}

// NewInProcess returns the in-process server for s.
func NewInProcess(s Scenario) *InProcess {
	return &InProcess{b: ratewisetest.NewBucket(config(s))}
}

// URL returns a base URL the transport answers for.
func (p *InProcess) URL() string { return "http://api.bench.test" }

// Transport returns the bucket.
func (p *InProcess) Transport() http.RoundTripper { return p.b }

// Stats returns the requests received and refused.
func (p *InProcess) Stats() (int, int) {
	st := p.b.Stats()
	return st.Received, st.Limited
}

// Close does nothing: there is nothing to stop.
func (p *InProcess) Close() {}

// config is the server of s.
func config(s Scenario) ratewisetest.Config {
	return ratewisetest.Config{Rate: s.Rate, Burst: s.Burst, Latency: s.Latency,
		PublishHeaders: s.Headers, IETFHeaders: s.Headers}
}
