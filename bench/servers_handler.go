package bench

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// limiter builds a third-party limit middleware for s around next, as
// its users configure it; stop ends whatever it started (a sweeper
// goroutine), so that a testing/synctest bubble can end.
type limiter func(s Scenario, next http.Handler) (h http.Handler, stop func(), err error)

// middlewareAPI is a third-party limiter around the scenario's
// application (appHandler), on loopback and, when inProcess, in the
// caller's goroutine.
func middlewareAPI(a API, l limiter, inProcess bool) API {
	a.Loopback = func(s Scenario) (Server, error) {
		h, stop, err := l(s, appHandler(s))
		if err != nil {
			return nil, err
		}
		return newHandlerLoopback(h, stop, s.Workers), nil
	}
	if inProcess {
		a.InProcess = func(s Scenario) (Server, error) {
			h, stop, err := l(s, appHandler(s))
			if err != nil {
				return nil, err
			}
			return newHandlerInProcess(h, stop), nil
		}
	}
	return a
}

// okHandler is the API behind every middleware: 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
})

// appHandler is the application behind a middleware for s: okHandler,
// which answers at once, or, when s has a service time, okHandler once
// the request has been served that long.
func appHandler(s Scenario) http.Handler {
	if s.Service <= 0 {
		return okHandler
	}
	return serviceHandler(s.Service)
}

// serviceHandler holds each request for d, then answers 200 "ok"; a
// request whose client goes away meanwhile gets no answer. Its timer is
// the clock's, so that in a testing/synctest bubble d takes no real time.
func serviceHandler(d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			okHandler.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	})
}

// counts counts the requests a handler receives and the 429s it answers.
type counts struct {
	received, refused atomic.Int64
}

// wrap returns h counted.
func (c *counts) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.received.Add(1)
		h.ServeHTTP(statusCounter{ResponseWriter: w, c: c}, r)
	})
}

// Stats returns the requests received and refused.
func (c *counts) Stats() (int, int) { return int(c.received.Load()), int(c.refused.Load()) }

// statusCounter counts a 429 as its header is written.
type statusCounter struct {
	http.ResponseWriter
	c *counts
}

// WriteHeader counts a 429 and writes code.
func (w statusCounter) WriteHeader(code int) {
	if code == http.StatusTooManyRequests {
		w.c.refused.Add(1)
	}
	w.ResponseWriter.WriteHeader(code)
}

// handlerLoopback is a handler served on 127.0.0.1, on a free port.
type handlerLoopback struct {
	counts
	srv       *httptest.Server
	transport *http.Transport
	stop      func()
}

func newHandlerLoopback(h http.Handler, stop func(), workers int) *handlerLoopback {
	l := &handlerLoopback{transport: loopbackTransport(workers), stop: stop}
	l.srv = httptest.NewServer(l.wrap(h))
	return l
}

// URL returns the server's base URL.
func (l *handlerLoopback) URL() string { return l.srv.URL }

// Transport returns the transport to reach it.
func (l *handlerLoopback) Transport() http.RoundTripper { return l.transport }

// Close stops the server and what the middleware started.
func (l *handlerLoopback) Close() {
	l.transport.CloseIdleConnections()
	l.srv.Close()
	l.stop()
}

// handlerInProcess calls a handler from RoundTrip, in the caller's
// goroutine, with no network: inside a testing/synctest bubble the
// handler's clock is the bubble's.
type handlerInProcess struct {
	counts
	h    http.Handler
	stop func()
}

func newHandlerInProcess(h http.Handler, stop func()) *handlerInProcess {
	p := &handlerInProcess{stop: stop}
	p.h = p.wrap(h)
	return p
}

// URL returns a base URL the transport answers for.
func (p *handlerInProcess) URL() string { return inProcessURL }

// Transport returns p, which calls the handler.
func (p *handlerInProcess) Transport() http.RoundTripper { return p }

// Close stops what the middleware started.
func (p *handlerInProcess) Close() { p.stop() }

// inProcessRemoteAddr is the client address in-process handlers see, so
// that middlewares keyed by IP find one.
const inProcessRemoteAddr = "127.0.0.1:40000"

// RoundTrip serves req with the handler and returns what it wrote.
func (p *handlerInProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.RemoteAddr = inProcessRemoteAddr
	r.RequestURI = req.URL.RequestURI()
	if r.Body == nil {
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	if err := req.Context().Err(); err != nil {
		return nil, err // gone while served, as a client over the network
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// noStop is the stop of a middleware that starts nothing.
func noStop() {}
