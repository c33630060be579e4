package bench

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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

// fullStack is every layer of ratewise on, none of them holding a request
// back: a limit at rate.Inf with a concurrency cap, the pause gate, the
// retry policy and a breaker.
func fullStack(base http.RoundTripper) http.RoundTripper {
	return ratewise.New(base, ratewise.WithLimit(ratewise.Limit{Rate: rate.Inf, MaxConcurrent: 1 << 20}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{}))
}

// withCallStats sends every request with a ratewise.CallStats in its
// context.
type withCallStats struct{ rt http.RoundTripper }

func (w withCallStats) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, _ := ratewise.WithCallStats(req.Context())
	return w.rt.RoundTrip(req.WithContext(ctx))
}

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
		{"ratewise/default+callstats", withCallStats{ratewise.New(newStaticBase())}},
		{"ratewise/adaptive", ratewise.New(newStaticBase(), ratewise.WithLimit(ratewise.Limit{Adaptive: true}))},
		{"ratewise/limit+retry+breaker", fullStack(newStaticBase())},
		{"go-retryablehttp", &retryablehttp.RoundTripper{Client: retryable}},
		{"failsafe-go/retry", failsafehttp.NewRoundTripper(newStaticBase(), failsafeRetry(Scenario{}))},
		{"failsafe-go/retry+breaker", failsafehttp.NewRoundTripper(newStaticBase(), failsafeRetry(Scenario{}),
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

// BenchmarkOverheadManyKeys runs from every core at once over 1,024
// hosts, to show that requests for different keys do not queue on a
// shared lock.
func BenchmarkOverheadManyKeys(b *testing.B) {
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		r, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://api%d.example.com/items", i), nil)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = r
	}
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", newStaticBase()},
		{"ratewise/limit+retry+breaker", fullStack(newStaticBase())},
		{"ratewise/adaptive", ratewise.New(newStaticBase(), ratewise.WithLimit(ratewise.Limit{Adaptive: true}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 97
				for pb.Next() {
					i++
					resp, err := bc.rt.RoundTrip(reqs[i%len(reqs)])
					if err != nil {
						b.Error(err)
						return
					}
					_ = resp.Body.Close()
				}
			})
		})
	}
}
