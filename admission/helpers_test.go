package admission

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// perMinute is a rate of n a minute.
func perMinute(n int) rate.Limit { return rate.Every(time.Minute / time.Duration(n)) }

// The ADR's scopes: 10 a minute, 5 at once, per client IP; 100 a minute,
// 20 at once, in all.
func adrPerIP() Limit {
	return Limit{Name: "ip", Rate: perMinute(10), Burst: 5}
}

func adrGlobal() Limit {
	return Limit{Name: "global", Rate: perMinute(100), Burst: 20, Key: ratewise.Global}
}

// ok is the API behind the handler: 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("ok"))
})

func newHandler(t testing.TB, opts ...Option) *Handler {
	t.Helper()
	h, err := New(ok, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// serve sends a GET of path from remote to h and returns the answer.
func serve(h http.Handler, remote, path string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://api.test"+path, nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// inProcess is an http.RoundTripper that serves each request with a
// handler in the caller's goroutine, as from remote: no network, so
// that client and server run together in a testing/synctest bubble.
type inProcess struct {
	h      http.Handler
	remote string

	mu       sync.Mutex
	statuses []int       // guarded by mu
	times    []time.Time // guarded by mu: when each answer was made
}

func (p *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	in := req.Clone(req.Context())
	in.RemoteAddr, in.RequestURI = p.remote, req.URL.RequestURI()
	if in.Body == nil {
		in.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, in)
	p.mu.Lock()
	p.statuses = append(p.statuses, rec.Code)
	p.times = append(p.times, time.Now())
	p.mu.Unlock()
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// refusals counts the answers that were not 200.
func (p *inProcess) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.statuses {
		if s != http.StatusOK {
			n++
		}
	}
	return n
}
