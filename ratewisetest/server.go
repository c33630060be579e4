package ratewisetest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// defaultSeed is what a zero Config.Seed means: fixed, so runs repeat.
const defaultSeed = 0x5eed

// limitedBody is the body of every refusal but an HTMLRefusal one, and of
// Fault429.
const limitedBody = `{"error":"rate limited"}`

// Stats counts what a [Server] or [Bucket] did. Every request is Received;
// it then ends in exactly one of Admitted (passed to the handler), Limited
// (refused by the limit) or Faults (given an injected fault), unless it was
// abandoned during the latency, in a LeakyBucket's queue or during its
// ServiceTime, which only Received counts.
type Stats struct {
	Received int `json:"received"` // Received counts every request.
	Admitted int `json:"admitted"` // Admitted counts requests passed to the handler.
	Limited  int `json:"limited"`  // Limited counts requests the limit refused.
	Faults   int `json:"faults"`   // Faults counts injected faults.
}

// Server is a fake rate-limited HTTP server listening on 127.0.0.1, built on
// [httptest.Server]. Create it with [NewServer] and stop it with
// [Server.Close]. A Server is safe for concurrent use. Each request waits
// out the latency, then meets the limit of its key (see "Server" in the
// package doc).
type Server struct {
	// URL is the base URL of the server, of the form http://127.0.0.1:port,
	// with no trailing slash.
	URL string

	api *api
	ts  *httptest.Server

	done      chan struct{} // closed by Close to cut latency waits short
	closeOnce sync.Once
}

// NewServer starts a server described by cfg on 127.0.0.1. It panics with
// the error of [Config.Validate] when cfg is invalid, and, like
// [httptest.NewServer], when it cannot listen on loopback.
func NewServer(cfg Config) *Server {
	s := &Server{api: newAPI(cfg), done: make(chan struct{})}

	s.ts = fakehttp.StartLoopback("ratewisetest", http.HandlerFunc(s.serve))
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
func (s *Server) Stats() Stats { return s.api.stats() }

// Arrivals returns when each request arrived, in order, for checking how a
// client paces its requests. The slice is a copy.
func (s *Server) Arrivals() []time.Time { return s.api.arrivalTimes() }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.api.serve(w, r, s.sleep)
}

// sleep waits d and reports whether it did, rather than being cut short by
// ctx or by Close.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	return sleep(ctx, d, s.done)
}

func okHandler(w http.ResponseWriter, _ *http.Request) {
	_, _ = io.WriteString(w, "ok")
}
