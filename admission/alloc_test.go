package admission

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratewise/ratewise"
)

// headerWriter is a ResponseWriter whose header map is kept from one
// request to the next, cleared: what a request allocates through it is
// the handler's own.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

// Hot path: an admitted request allocates the two values of its headers
// that change from request to request (one string, cut into the values,
// and the slice holding them), and nothing else, whether one scope or
// three admit it; none without headers.
func TestAdmittedRequestAllocations(t *testing.T) {
	unlimited := func(name string, key ratewise.KeyFunc) Limit {
		return Limit{Name: name, Rate: 1e9, Burst: 1e9, Key: key}
	}
	tests := []struct {
		name string
		opts []Option
		want float64
	}{
		{"one scope", []Option{WithLimit(unlimited("ip", nil))}, 2},
		{"three scopes", []Option{WithLimit(unlimited("ip", nil)), WithLimit(unlimited("route", Route)),
			WithLimit(unlimited("global", ratewise.Global))}, 2},
		{"three scopes, no headers", []Option{WithLimit(unlimited("ip", nil)), WithLimit(unlimited("route", Route)),
			WithLimit(unlimited("global", ratewise.Global)), WithHeaders(0)}, 0},
		{"behind a trusted proxy", []Option{WithLimit(unlimited("ip", nil)), WithClientIP(ClientIP{TrustedProxies: []string{"10.0.0.0/8"}})}, 2},
	}
	for _, tt := range tests {
		h, err := New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, "http://api.test/items", nil)
		req.RemoteAddr = "10.1.2.3:40000"
		req.Header.Set("X-Forwarded-For", "198.51.100.1")
		w := &headerWriter{h: http.Header{}}
		got := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, req)
		})
		if w.code != 0 || got != tt.want {
			t.Errorf("%s: %v allocations, status %d; want %v", tt.name, got, w.code, tt.want)
		}
	}
}
