package bench

import (
	"io"
	"net/http"
	"testing"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// staticBase answers every request with a copy of the same 200, so that a
// benchmark through it measures what the layers above add to the cost of
// a response (one allocation, counted in the bare case too).
type staticBase struct{ resp *http.Response }

func (b staticBase) RoundTrip(*http.Request) (*http.Response, error) {
	resp := *b.resp
	return &resp, nil
}

func newStaticBase() staticBase {
	return staticBase{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: emptyBody{}}}
}

// emptyBody is a body with nothing in it that, unlike http.NoBody, the
// layers treat as a real one.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// overheadCases are the RoundTrippers measured, each over its own base.
func overheadCases() []struct {
	name string
	rt   http.RoundTripper
} {
	retryable := retryablehttp.NewClient()
	retryable.HTTPClient = &http.Client{Transport: newStaticBase()}
	retryable.Logger = nil
	return []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", newStaticBase()},
		{"ratewise/default", ratewise.New(newStaticBase())},
		{"ratewise/adaptive", ratewise.New(newStaticBase(), ratewise.WithLimit(ratewise.Limit{Adaptive: true}))},
		{"ratewise/limit+retry+breaker", ratewise.New(newStaticBase(),
			ratewise.WithLimit(ratewise.Limit{Rate: rate.Inf, MaxConcurrent: 1 << 20}), ratewise.WithBreaker(ratewise.BreakerPolicy{}))},
		{"go-retryablehttp", &retryablehttp.RoundTripper{Client: retryable}},
		{"failsafe-go/retry", failsafehttp.NewRoundTripper(newStaticBase(), failsafeRetry())},
		{"failsafe-go/retry+breaker", failsafehttp.NewRoundTripper(newStaticBase(), failsafeRetry(),
			circuitbreaker.NewWithDefaults[*http.Response]())},
	}
}

// BenchmarkOverhead measures one GET that is not retried through each
// client's RoundTripper, against the bare base: what each adds to a call
// that needs none of its help.
func BenchmarkOverhead(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range overheadCases() {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("RoundTrip = %v, %v", resp, err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}

// BenchmarkOverheadParallel is BenchmarkOverhead from every core at once,
// all on one host: what the shared state of each costs under contention.
func BenchmarkOverheadParallel(b *testing.B) {
	for _, bc := range overheadCases() {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, err := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					resp, err := bc.rt.RoundTrip(req)
					if err != nil || resp.StatusCode != 200 {
						b.Errorf("RoundTrip = %v, %v", resp, err)
						return
					}
					_ = resp.Body.Close()
				}
			})
		})
	}
}
