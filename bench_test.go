package ratewise

import (
	"net/http"
	"testing"

	"github.com/hashicorp/go-retryablehttp"
)

// staticBase answers every request with the same 200 at no cost, so that a
// benchmark through it measures only what the layers above add.
type staticBase struct{ resp *http.Response }

func (b staticBase) RoundTrip(*http.Request) (*http.Response, error) { return b.resp, nil }

func newStaticBase() staticBase {
	return staticBase{resp: &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}}
}

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
