package otel

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ratewise/ratewise"
)

// BenchmarkOverhead is a call that needs no help, on loopback: through
// the base transport alone, ratewise alone, ratewise reporting to no-op
// providers, ratewise reporting to the SDK (every span sampled, metrics
// aggregated, nothing exported), and otelhttp alone on the same SDK.
// Compare them with benchstat: go test -run '^$' -bench Overhead -count 6 .
func BenchmarkOverhead(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	base := srv.Client().Transport
	sdk := func() Config {
		return Config{
			TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())),
			MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
			Propagator:     propagation.TraceContext{},
		}
	}
	noop := Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	sdkOtelhttp := sdk()
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"base", base},
		{"ratewise", ratewise.New(base)},
		{"rwotel-noop", New(base, noop)},
		{"rwotel-sdk", New(base, sdk())},
		{"otelhttp-sdk", otelhttp.NewTransport(base, otelhttp.WithTracerProvider(sdkOtelhttp.TracerProvider),
			otelhttp.WithMeterProvider(sdkOtelhttp.MeterProvider), otelhttp.WithPropagators(sdkOtelhttp.Propagator))},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: c.rt}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Get(srv.URL)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
