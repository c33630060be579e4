package ratewise

import (
	"net/http"
	"testing"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
)

// BenchmarkOverheadPaced measures one GET that is not retried through a
// scope that paces it without holding it back: what taking a turn of a
// told bucket, spacing or window costs a request (the bench module's
// BenchmarkOverhead measures the default path and the layers without a
// pace).
func BenchmarkOverheadPaced(b *testing.B) {
	plain := http.Header{}
	// A count whose reset is a minute on: a told window reads it for
	// where the server's window ends (Scope.Align), and finds nothing.
	counted := http.Header{"X-Ratelimit-Remaining": {"999"}, "X-Ratelimit-Reset": {"60"}}
	for _, bc := range []struct {
		name   string
		limit  Limit
		header http.Header
	}{
		{"bucket", Limit{Rate: 1e12, Burst: 1 << 30}, plain},
		{"spacing", Limit{MinSpacing: time.Nanosecond}, plain},
		// A start leaves the window windowMargin after it: 65,536 turns
		// last while a request takes more than 76 ns.
		{"window", Limit{Burst: limit.MaxWindowBurst, Window: time.Nanosecond}, plain},
		{"window, counted", Limit{Burst: limit.MaxWindowBurst, Window: time.Nanosecond}, counted},
		{"bucket+store", Limit{Rate: 1e12, Burst: 1 << 30, Store: NewMemoryStore()}, plain},
	} {
		b.Run(bc.name, func(b *testing.B) {
			base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody, Header: bc.header}}
			tr := New(base, WithLimit(bc.limit))
			req, err := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOverheadLearned measures one GET that is not retried through
// the learned pace of a key whose server counts its quota, never spent:
// what taking a turn of the pace and learning from the answer's count
// cost a request, on the path of every request of a key that learned.
func BenchmarkOverheadLearned(b *testing.B) {
	base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody,
		Header: http.Header{"X-Ratelimit-Limit": {"1000000"}, "X-Ratelimit-Remaining": {"999999"}}}}
	tr := New(base)
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tr.RoundTrip(req); err != nil { // the first answer's count arms the key
		b.Fatal(err)
	}
	if st := tr.KeyStatus("api.example.com").Scopes[0]; !st.Counted {
		b.Fatalf("status %+v, want the key paced by the server's count", st)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.RoundTrip(req); err != nil {
			b.Fatal(err)
		}
	}
}
