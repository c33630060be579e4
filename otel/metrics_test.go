package otel

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"

	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ratewise/ratewise"
)

// pointAttributes are the attribute sets of a metric's data points.
func pointAttributes(data metricdata.Aggregation) []attribute.Set {
	switch d := data.(type) {
	case metricdata.Sum[int64]:
		return setsOf(d.DataPoints)
	case metricdata.Gauge[int64]:
		return setsOf(d.DataPoints)
	case metricdata.Gauge[float64]:
		return setsOf(d.DataPoints)
	case metricdata.Histogram[int64]:
		return histogramSetsOf(d.DataPoints)
	case metricdata.Histogram[float64]:
		return histogramSetsOf(d.DataPoints)
	}
	return nil
}

func setsOf[N int64 | float64](points []metricdata.DataPoint[N]) []attribute.Set {
	sets := make([]attribute.Set, 0, len(points))
	for _, p := range points {
		sets = append(sets, p.Attributes)
	}
	return sets
}

func histogramSetsOf[N int64 | float64](points []metricdata.HistogramDataPoint[N]) []attribute.Set {
	sets := make([]attribute.Set, 0, len(points))
	for _, p := range points {
		sets = append(sets, p.Attributes)
	}
	return sets
}

// With no-op providers the transport is ratewise alone: no span, no
// header added to the attempts, no hook (see BenchmarkOverhead).
func TestNoopProvidersAddNothing(t *testing.T) {
	base := &scripted{answers: []func(*http.Request) (*http.Response, error){status(200)}}
	tr := New(base, Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Propagator: propagation.TraceContext{}})
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example.com/items")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if tr.tracer != nil || base.parents[0] != "" {
		t.Errorf("a no-op tracer provider: tracing %v, traceparent %q; want neither", tr.tracer != nil, base.parents[0])
	}
}

// With a no-op tracer and a recording meter, the attempts are still
// measured; and a caller's trace context still goes on in the attempts'
// headers.
func TestMetricsWithoutTracing(t *testing.T) {
	base := &scripted{answers: []func(*http.Request) (*http.Response, error){status(200)}}
	r := newRecorded(nil, Config{})
	tr := New(base, Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: r.mp, Propagator: propagation.TraceContext{}})
	parent, span := r.tp.Tracer("caller").Start(context.Background(), "caller")
	defer span.End()
	req, _ := http.NewRequestWithContext(parent, http.MethodGet, "http://api.example.com/items", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	dur, _ := r.metrics(t)["http.client.request.duration"].(metricdata.Histogram[float64])
	if len(dur.DataPoints) != 1 || dur.DataPoints[0].Count != 1 {
		t.Errorf("http.client.request.duration: %+v, want the attempt", dur.DataPoints)
	}
	sc := span.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; base.parents[0] != want {
		t.Errorf("the attempt carried traceparent %q, want the caller's %q", base.parents[0], want)
	}
}

// The pace ratewise learns of a key's server from its refusals is a
// gauge, by key and scope.
func TestLearnedRateGauge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Four let through, then a 429: a refusal once a burst has
		// passed is about rate (one after fewer is first tried
		// unpaced, as a load shedder's would be).
		base := &scripted{answers: []func(*http.Request) (*http.Response, error){status(200), status(200), status(200), status(200),
			status(429), status(200)}}
		r := newRecorded(base, Config{}, quickRetries)
		for range 5 {
			resp, err := (&http.Client{Transport: r.tr}).Get("http://api.example.com/items")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		gauge, _ := r.metrics(t)["ratewise.client.limit.learned_rate"].(metricdata.Gauge[float64])
		if len(gauge.DataPoints) != 1 || gauge.DataPoints[0].Value <= 0 {
			t.Fatalf("ratewise.client.limit.learned_rate: %+v, want the pace learned from the 429", gauge.DataPoints)
		}
		key, _ := gauge.DataPoints[0].Attributes.Value(attrKey)
		scope, _ := gauge.DataPoints[0].Attributes.Value(attrScopeName)
		if key.AsString() != "api.example.com" || scope.AsString() != ratewise.LearnedScope {
			t.Errorf("the gauge's key %q, scope %q; want api.example.com, %s", key.AsString(), scope.AsString(), ratewise.LearnedScope)
		}
	})
}
