package otel

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratewise/ratewise"
)

// recorded is a transport under test with what it reported.
type recorded struct {
	tr     *Transport
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     trace.TracerProvider
	mp     *sdkmetric.MeterProvider
}

func newRecorded(base http.RoundTripper, cfg Config, opts ...ratewise.Option) *recorded {
	r := &recorded{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	cfg.TracerProvider = r.tp
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	cfg.MeterProvider = r.mp
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	r.tr = New(base, cfg, opts...)
	return r
}

// metrics collects the metrics, by name.
func (r *recorded) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// scripted answers each attempt with the next of its answers, after a
// service time, and notes the traceparent each carried.
type scripted struct {
	mu       sync.Mutex
	answers  []func(*http.Request) (*http.Response, error)
	parents  []string
	service  time.Duration
	requests []*http.Request
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.parents = append(s.parents, req.Header.Get("traceparent"))
	s.requests = append(s.requests, req)
	answer := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	s.mu.Unlock()
	time.Sleep(s.service)
	return answer(req)
}

func status(code int, header ...string) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		h := http.Header{}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: h, Body: io.NopCloser(strings.NewReader("body")), Request: req}, nil
	}
}

func attr(attrs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, a := range attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// A call refused twice (429, Retry-After: 1) then answered is one
// INTERNAL span with three CLIENT children: the conventions' attributes,
// http.request.resend_count 1 and 2 on the resends, each attempt's trace
// context in its headers; its waits are events whose durations add up to
// the time the call waited; and the metrics say what the spans say.
func TestCallRefusedTwiceThenAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{service: 50 * time.Millisecond, answers: []func(*http.Request) (*http.Response, error){
			status(429, "Retry-After", "1"), status(429, "Retry-After", "1"), status(200)}}
		r := newRecorded(base, Config{}, ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond}))
		client := &http.Client{Transport: r.tr}
		resp, err := client.Get("https://api.example.com:8443/cards/7?page=2")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()

		spans := r.spans.Ended()
		if len(spans) != 4 {
			t.Fatalf("%d spans, want a call and its three attempts", len(spans))
		}
		callSpan := spans[len(spans)-1]
		if callSpan.Name() != "ratewise GET" || callSpan.SpanKind() != trace.SpanKindInternal {
			t.Errorf("the call span is %q, %v; want \"ratewise GET\", internal", callSpan.Name(), callSpan.SpanKind())
		}
		var attemptTime time.Duration
		for i, s := range spans[:3] {
			attemptTime += s.EndTime().Sub(s.StartTime())
			if s.Name() != "GET" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != callSpan.SpanContext().SpanID() {
				t.Errorf("attempt %d: %q, %v, parent %v; want \"GET\", client, child of the call span", i+1, s.Name(), s.SpanKind(), s.Parent().SpanID())
			}
			attrs := s.Attributes()
			for key, want := range map[attribute.Key]string{"http.request.method": "GET", "server.address": "api.example.com",
				"url.full": "https://api.example.com:8443/cards/7?page=2", "network.protocol.version": "1.1"} {
				if v, _ := attr(attrs, key); v.String() != want {
					t.Errorf("attempt %d: %s = %q, want %q", i+1, key, v.String(), want)
				}
			}
			if v, _ := attr(attrs, "server.port"); v.AsInt64() != 8443 {
				t.Errorf("attempt %d: server.port = %v", i+1, v.String())
			}
			resend, ok := attr(attrs, "http.request.resend_count")
			switch {
			case i == 0 && ok:
				t.Errorf("the first attempt has http.request.resend_count %v", resend.String())
			case i > 0 && resend.AsInt64() != int64(i):
				t.Errorf("attempt %d: http.request.resend_count = %v, want %d", i+1, resend.String(), i)
			}
			code, _ := attr(attrs, "http.response.status_code")
			errType, hasErrType := attr(attrs, "error.type")
			if i < 2 {
				if code.AsInt64() != 429 || errType.String() != "429" || s.Status().Code != codes.Error {
					t.Errorf("attempt %d: status %v, error.type %q, span status %v; want 429, \"429\", Error", i+1, code.String(), errType.String(), s.Status().Code)
				}
			} else if code.AsInt64() != 200 || hasErrType || s.Status().Code != codes.Unset {
				t.Errorf("attempt 3: status %v, error.type %v, span status %v; want 200, none, Unset", code.String(), errType.String(), s.Status().Code)
			}
			if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; base.parents[i] != want {
				t.Errorf("attempt %d carried traceparent %q, want its span's %q", i+1, base.parents[i], want)
			}
		}

		// The call span: its outcome and its waits.
		cattrs := callSpan.Attributes()
		attempts, _ := attr(cattrs, attrAttempts)
		waitedAttr, _ := attr(cattrs, attrWaited)
		code, _ := attr(cattrs, "http.response.status_code")
		if attempts.AsInt64() != 3 || code.AsInt64() != 200 || callSpan.Status().Code != codes.Unset {
			t.Errorf("the call span: %v attempts, status %v, span status %v; want 3, 200, Unset", attempts.String(), code.String(), callSpan.Status().Code)
		}
		var waitSum float64
		backoffs := 0
		for _, e := range callSpan.Events() {
			if e.Name != "ratewise.wait" {
				continue
			}
			d, _ := attr(e.Attributes, attrWaitDuration)
			waitSum += d.AsFloat64()
			if kind, _ := attr(e.Attributes, attrWaitKind); kind.String() == "backoff" {
				backoffs++
				hint, _ := attr(e.Attributes, attrWaitHint)
				if d.AsFloat64() != 1 || hint.AsFloat64() != 1 {
					t.Errorf("a backoff event of %vs for a hint of %vs, want 1s for Retry-After: 1", d.AsFloat64(), hint.AsFloat64())
				}
			}
		}
		if backoffs != 2 {
			t.Errorf("%d backoff events, want one per retry", backoffs)
		}
		if math.Abs(waitSum-waitedAttr.AsFloat64()) > 1e-9 || waitSum < 2 {
			t.Errorf("the wait events add up to %vs, the call span says it waited %vs; want them equal, 2s at least", waitSum, waitedAttr.AsFloat64())
		}

		// The metrics say the same.
		m := r.metrics(t)
		dur, ok := m["http.client.request.duration"].(metricdata.Histogram[float64])
		var count uint64
		var sum float64
		if ok {
			for _, dp := range dur.DataPoints {
				count += dp.Count
				sum += dp.Sum
			}
		}
		if count != 3 || math.Abs(sum-attemptTime.Seconds()) > 1e-9 {
			t.Errorf("http.client.request.duration: %d attempts, %vs; want 3 and the attempt spans' %vs", count, sum, attemptTime.Seconds())
		}
		calls, _ := m["ratewise.client.calls"].(metricdata.Sum[int64])
		if len(calls.DataPoints) != 1 || calls.DataPoints[0].Value != 1 {
			t.Errorf("ratewise.client.calls: %+v, want one call", calls.DataPoints)
		} else if v, _ := calls.DataPoints[0].Attributes.Value(attrOutcome); v.String() != "ok" {
			t.Errorf("the call's outcome %q, want ok", v.String())
		}
		retries, _ := m["ratewise.client.call.retries"].(metricdata.Histogram[int64])
		if len(retries.DataPoints) != 1 || retries.DataPoints[0].Sum != 2 {
			t.Errorf("ratewise.client.call.retries: %+v, want 2 for the call", retries.DataPoints)
		}
		waits, _ := m["ratewise.client.wait.duration"].(metricdata.Histogram[float64])
		var waitMetric float64
		for _, dp := range waits.DataPoints {
			waitMetric += dp.Sum
		}
		if math.Abs(waitMetric-waitSum) > 1e-9 {
			t.Errorf("ratewise.client.wait.duration sums %vs, the events %vs", waitMetric, waitSum)
		}
		refusals, _ := m["ratewise.client.refusals"].(metricdata.Sum[int64])
		if len(refusals.DataPoints) != 1 || refusals.DataPoints[0].Value != 2 {
			t.Errorf("ratewise.client.refusals: %+v, want the two 429s", refusals.DataPoints)
		}
	})
}

// A call refused by an open breaker says so on its span, as an error and
// an event; the breaker's change is counted, and its state is a gauge.
func TestRefusedByTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scripted{answers: []func(*http.Request) (*http.Response, error){status(503)}}
		r := newRecorded(base, Config{}, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 1, FailFast: true}))
		client := &http.Client{Transport: r.tr}
		resp, err := client.Get("http://api.example.com/items")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		_, err = client.Get("http://api.example.com/items")
		var open *ratewise.CircuitOpenError
		if !errors.As(err, &open) {
			t.Fatalf("the second call: %v, want a CircuitOpenError", err)
		}
		spans := r.spans.Ended()
		callSpan := spans[len(spans)-1]
		if callSpan.Status().Code != codes.Error {
			t.Errorf("the refused call's span status %v, want Error", callSpan.Status())
		}
		reason, _ := attr(callSpan.Attributes(), attrGiveUp)
		if reason.String() != "breaker_open" {
			t.Errorf("give-up reason %q, want breaker_open", reason.String())
		}
		var tripped bool
		for _, s := range spans {
			for _, e := range s.Events() {
				if to, _ := attr(e.Attributes, attrTo); e.Name == "ratewise.breaker" && to.String() == "open" {
					tripped = s.SpanContext().SpanID() != callSpan.SpanContext().SpanID() // the first call's, not the refused one's
				}
			}
		}
		if !tripped {
			t.Error("the span of the call that tripped the breaker has no ratewise.breaker event")
		}
		var refused bool
		for _, e := range callSpan.Events() {
			if by, _ := attr(e.Attributes, attrRefusedBy); e.Name == "ratewise.refused" && by.String() == "breaker" {
				refused = true
			}
		}
		if !refused {
			t.Errorf("no ratewise.refused event by the breaker: %+v", callSpan.Events())
		}
		m := r.metrics(t)
		transitions, _ := m["ratewise.client.breaker.transitions"].(metricdata.Sum[int64])
		if len(transitions.DataPoints) != 1 || transitions.DataPoints[0].Value != 1 {
			t.Errorf("breaker transitions %+v, want one, closed to open", transitions.DataPoints)
		} else if to, _ := transitions.DataPoints[0].Attributes.Value(attrTo); to.String() != "open" {
			t.Errorf("the transition went to %q, want open", to.String())
		}
		state, _ := m["ratewise.client.breaker.state"].(metricdata.Gauge[int64])
		if len(state.DataPoints) != 1 || state.DataPoints[0].Value != 2 {
			t.Errorf("breaker state gauge %+v, want 2 (open)", state.DataPoints)
		}
	})
}

// No secret of the request shows in any span, event, status or metric:
// not its credential headers, nor its URL's user info, nor a key in its
// query, nor an error quoting its URL.
func TestNoSecretIsExported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const secret = "sekret"
		base := &scripted{answers: []func(*http.Request) (*http.Response, error){
			status(429, "Retry-After", "1"),
			func(req *http.Request) (*http.Response, error) {
				return nil, &netError{"dial " + req.URL.String() + ": connection refused with key " + req.Header.Get("X-Api-Key")}
			},
			status(200)}}
		r := newRecorded(base, Config{}, ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond}))
		req, _ := http.NewRequest(http.MethodGet, "https://user:"+secret+"-pw@api.example.com/items?api_key="+secret+"-q&page=1", nil)
		req.Header.Set("X-Api-Key", secret+"-header")
		req.Header.Set("Authorization", "Bearer "+secret+"-bearer")
		resp, err := (&http.Client{Transport: r.tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()

		var seen []string
		check := func(where string, attrs []attribute.KeyValue) {
			for _, a := range attrs {
				seen = append(seen, string(a.Key))
				if strings.Contains(a.Value.String(), secret) {
					t.Errorf("%s: %s = %q shows a secret", where, a.Key, a.Value.String())
				}
			}
		}
		for _, s := range r.spans.Ended() {
			check("span "+s.Name(), s.Attributes())
			if strings.Contains(s.Status().Description, secret) {
				t.Errorf("span %s: its status %q shows a secret", s.Name(), s.Status().Description)
			}
			for _, e := range s.Events() {
				check("event "+e.Name, e.Attributes)
			}
		}
		var rm metricdata.ResourceMetrics
		if err := r.reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				for _, set := range pointAttributes(m.Data) {
					check("metric "+m.Name, set.ToSlice())
				}
			}
		}
		if len(seen) < 20 {
			t.Errorf("only %d attributes were checked", len(seen))
		}
	})
}

// netError is a network error that quotes what it was given.
type netError struct{ msg string }

func (e *netError) Error() string   { return e.msg }
func (e *netError) Timeout() bool   { return false }
func (e *netError) Temporary() bool { return false }

// A base transport that makes calls of its own through another ratewise
// transport, with the attempt's context: those calls are not the outer
// call's. Its span keeps its own attempts, waits and outcome.
func TestNestedCallsAreNotTheOuterCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := ratewise.New(&scripted{answers: []func(*http.Request) (*http.Response, error){status(429), status(429), status(200)}},
			ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: 100 * time.Millisecond, MaxDelay: 500 * time.Millisecond}))
		nesting := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			var wg sync.WaitGroup
			for range 2 { // two calls of its own, side by side
				wg.Go(func() {
					sub, _ := http.NewRequestWithContext(req.Context(), http.MethodGet, "http://other.example.com/token", nil)
					if resp, err := inner.RoundTrip(sub); err == nil {
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			return status(200)(req)
		})
		r := newRecorded(nesting, Config{})
		resp, err := (&http.Client{Transport: r.tr}).Get("http://api.example.com/items")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var callSpan sdktrace.ReadOnlySpan
		for _, s := range r.spans.Ended() {
			if s.SpanKind() == trace.SpanKindInternal {
				callSpan = s
			}
		}
		attempts, _ := attr(callSpan.Attributes(), attrAttempts)
		if attempts.AsInt64() != 1 || len(callSpan.Events()) != 0 || callSpan.Status().Code != codes.Unset {
			t.Errorf("the outer call span: %v attempts, %d events, status %v; want 1, none, unset", attempts.AsInt64(), len(callSpan.Events()), callSpan.Status())
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
