package ratewise

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"
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
// transport treats as a real one (a concurrency slot waits for its Close).
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// BenchmarkRoundTrip measures one GET that is not retried: through the bare
// base, through a ratewise Transport with the default policy, and, for
// scale, through go-retryablehttp's RoundTripper.
func BenchmarkRoundTrip(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, testURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, rt http.RoundTripper) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil || resp.StatusCode != 200 {
				b.Fatalf("RoundTrip = %v, %v", resp, err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, newStaticBase()) })
	b.Run("ratewise", func(b *testing.B) { run(b, New(newStaticBase())) })
	b.Run("ratewise-callstats", func(b *testing.B) {
		ctx, _ := WithCallStats(req.Context())
		req := req.WithContext(ctx)
		rt := New(newStaticBase())
		b.ReportAllocs()
		for b.Loop() {
			if _, err := rt.RoundTrip(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("go-retryablehttp", func(b *testing.B) {
		client := retryablehttp.NewClient()
		client.HTTPClient = &http.Client{Transport: newStaticBase()}
		client.Logger = nil
		run(b, &retryablehttp.RoundTripper{Client: client})
	})
}

// fullStack is every layer on, none of them holding a request back: a
// limit at rate.Inf with a concurrency cap, the cooldown gate, the retry
// policy and a breaker.
func fullStack(base http.RoundTripper) *Transport {
	return New(base, WithLimit(Limit{Rate: rate.Inf, MaxConcurrent: 1 << 20}), WithRetry(RetryPolicy{}), WithBreaker(BreakerPolicy{}))
}

// BenchmarkStack measures one GET that is not retried through all three
// layers, against the bare base.
func BenchmarkStack(b *testing.B) {
	req, err := http.NewRequest(http.MethodGet, testURL, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", newStaticBase()},
		{"limit+retry+breaker", fullStack(newStaticBase())},
		{"limit+retry+breaker-no-slots", New(newStaticBase(), WithLimit(Limit{Rate: rate.Inf}), WithBreaker(BreakerPolicy{}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
			}
		})
	}
}

// BenchmarkStackParallel runs the full stack from every core at once over
// 1,024 keys, to show that requests for different keys do not queue on a
// shared lock.
func BenchmarkStackParallel(b *testing.B) {
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
		{"limit+retry+breaker", fullStack(newStaticBase())},
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
