package ratewisetest

import (
	"io"
	"math"
	"net/http"
	"testing"
	"time"
)

// BenchmarkBucketAdmitted measures the in-process answer to a request the
// limit admits: the path every admitted request of a test takes.
func BenchmarkBucketAdmitted(b *testing.B) {
	benchmarks := []struct {
		name string
		give Config
	}{
		{name: "NoLimit", give: Config{}},
		{name: "TokenBucket", give: Config{Rate: 1e12, Burst: 1}},
		{name: "TokenBucketHeaders", give: Config{Rate: 1e12, Burst: 1, PublishHeaders: true, IETFHeaders: true}},
		{name: "LeakyBucket", give: Config{Model: LeakyBucket, Rate: 1e12, NoDelay: true}},
		{name: "FixedWindow", give: Config{Model: FixedWindow, Limit: math.MaxInt, Window: time.Hour}},
		{name: "SlidingWindow", give: Config{Model: SlidingWindow, Limit: math.MaxInt, Window: time.Hour}},
		{name: "SlidingWindowHeaders", give: Config{Model: SlidingWindow, Limit: math.MaxInt, Window: time.Hour, PublishHeaders: true, IETFHeaders: true}},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			benchAdmitted(b, bm.give)
		})
	}
}

func benchAdmitted(b *testing.B, cfg Config) {
	rt := NewBucket(cfg)
	req, err := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status = %d, want 200", resp.StatusCode)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkTake measures a model's own decision on an admitted request,
// without the recorder and response around it.
func BenchmarkTake(b *testing.B) {
	benchmarks := []struct {
		name string
		give Config
	}{
		{name: "TokenBucket", give: Config{Rate: 1e12, Burst: 1}},
		{name: "LeakyBucket", give: Config{Model: LeakyBucket, Rate: 1e12, NoDelay: true}},
		{name: "FixedWindow", give: Config{Model: FixedWindow, Limit: math.MaxInt, Window: time.Hour}},
		{name: "SlidingWindow", give: Config{Model: SlidingWindow, Limit: math.MaxInt, Window: time.Hour}},
	}
	for _, bm := range benchmarks {
		b.Run(bm.name, func(b *testing.B) {
			a := newAPI(bm.give)
			b.ReportAllocs()
			for b.Loop() {
				if v, _, _ := a.take(""); !v.admitted {
					b.Fatal("refused")
				}
			}
		})
	}
}
