package bench

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
)

// discardWriter is a ResponseWriter whose header map is kept from one
// request to the next, cleared, and whose body goes nowhere: what a
// request allocates through it is the handler's and the limiter's own.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// noContent is the handler behind every limiter: it writes nothing, so
// that the benchmark measures the limiter.
var noContent = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// httprateByIP keys a request by its client address for httprate, as
// httprateLimiter does (its LimitByIP is deprecated for LimitBy with a
// key of one's choice).
func httprateByIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return "", err
	}
	return httprate.CanonicalizeIP(host), nil
}

// admissionCases are the handlers measured: the bare handler, behind
// go-chi/httprate keyed by the client's IP, and behind ratewise's
// admission with one scope (per IP) and three (per IP, per route,
// global), each with limits no request meets, so that every request is
// admitted.
func admissionCases(b *testing.B) []struct {
	name string
	h    http.Handler
} {
	unlimited := func(name string, key ratewise.KeyFunc) admission.Option {
		return admission.WithLimit(admission.Limit{Name: name, Rate: 1e9, Burst: 1e9, Key: key})
	}
	one, err := admission.New(noContent, unlimited("ip", nil))
	if err != nil {
		b.Fatal(err)
	}
	three, err := admission.New(noContent, unlimited("ip", nil), unlimited("route", admission.Route), unlimited("global", ratewise.Global))
	if err != nil {
		b.Fatal(err)
	}
	return []struct {
		name string
		h    http.Handler
	}{
		{"bare", noContent},
		{"go-chi/httprate", httprate.LimitBy(1<<30, time.Minute, httprateByIP)(noContent)},
		{"ratewise/admission/one-scope", one},
		{"ratewise/admission/three-scopes", three},
	}
}

// BenchmarkAdmission measures one admitted GET through each handler,
// called as a server calls it (an httptest request from one client
// address), against the bare handler: what each limiter adds to a
// request it lets through, its headers included.
func BenchmarkAdmission(b *testing.B) {
	for _, bc := range admissionCases(b) {
		b.Run(bc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "http://api.example.com/items", nil)
			req.RemoteAddr = "192.0.2.1:40000"
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				bc.h.ServeHTTP(w, req)
			}
			if w.code != 0 {
				b.Fatalf("the last request was answered %d, want admitted", w.code)
			}
		})
	}
}

// BenchmarkAdmissionParallel is BenchmarkAdmission from every core at
// once, all from one client address: what each limiter's shared state
// costs under contention.
func BenchmarkAdmissionParallel(b *testing.B) {
	for _, bc := range admissionCases(b) {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "http://api.example.com/items", nil)
				req.RemoteAddr = "192.0.2.1:40000"
				w := &discardWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					bc.h.ServeHTTP(w, req)
				}
				if w.code != 0 {
					b.Errorf("the last request was answered %d, want admitted", w.code)
				}
			})
		})
	}
}
