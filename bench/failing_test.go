package bench

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// failingServer is a server behind which a share of the requests it lets
// through fails with a bare 503 (no Retry-After), as failing does behind
// throttled's middleware: a transient error after the limiter counted
// the request.
type failingServer struct {
	Server
	rt http.RoundTripper
}

func (f failingServer) Transport() http.RoundTripper { return f.rt }

// failBehind turns a share of the 2xx answers of base into a bare 503,
// as failing does behind a middleware (seededFailures).
type failBehind struct {
	base  http.RoundTripper
	fails *seededFailures
}

func (f failBehind) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := f.base.RoundTrip(req)
	if err != nil || resp.StatusCode/100 != 2 || !f.fails.next() {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader("Service Unavailable\n")), Request: req}, nil
}

// TestEveryServerWith503sBehindIt: every in-process rate limiter (the
// load shedders aside, whose every refusal is a failure already) with 5%
// of what it lets through failing behind it with a bare 503: the defaults
// and every preset complete every call, the 503s of GETs retried as
// transient errors.
func TestEveryServerWith503sBehindIt(t *testing.T) {
	scenarios := map[Kind]Scenario{
		Bucket:      {Name: "bucket, 5% 503s", Rate: 50, Burst: 10, Workers: 20, Calls: 200},
		Window:      {Name: "window, 5% 503s", Limit: 30, Window: 10 * time.Second, Workers: 10, Calls: 90},
		Concurrency: {Name: "cap, 5% 503s", Limit: 5, Service: 50 * time.Millisecond, Workers: 20, Calls: 200},
	}
	contenders := []string{"ratewise defaults", "ratewise Conservative", "ratewise Moderate", "ratewise Aggressive"}
	for _, api := range APIs() {
		s, ok := scenarios[api.Model.Kind()]
		if api.InProcess == nil || !ok || strings.Contains(api.Name, "503s") {
			continue
		}
		for _, name := range contenders {
			c := contenderNamed(t, name)
			t.Run(api.Name+"/"+name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s.Model = api.Model
					srv := startInProcess(t, api, s)
					f := failBehind{base: srv.Transport(), fails: newSeededFailures(failShare)}
					r := Run(context.Background(), s, c, failingServer{srv, f}, api.Ideal(s))
					if r.Failed != 0 || r.Cut {
						t.Errorf("%d of %d calls failed (cut %v), %d requests, %d refused; want none failed", r.Failed, s.Calls, r.Cut, r.Received, r.Refused)
					}
				})
			})
		}
	}
}
