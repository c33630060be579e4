package otel

import (
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratewise/ratewise"
)

// twice429 answers 429 twice, then 200, at once.
func twice429() *scripted {
	return &scripted{answers: []func(*http.Request) (*http.Response, error){status(429), status(429), status(200)}}
}

var quickRetries = ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})

// With otelhttp as the base and NoAttemptSpans, otelhttp's spans are the
// attempts, children of the call span: one CLIENT span per attempt, not
// two.
func TestOtelhttpAsTheBase(t *testing.T) {
	base := twice429()
	r := newRecorded(nil, Config{}, quickRetries) // for its recorder and provider
	tp := r.tp
	r.tr = New(otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{})),
		Config{TracerProvider: tp, NoAttemptSpans: true}, quickRetries)
	resp, err := (&http.Client{Transport: r.tr}).Get("http://api.example.com/items")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := r.spans.Ended()
	var callSpan sdktrace.ReadOnlySpan // otelhttp ends its spans as their bodies close, after the call's
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindInternal {
			callSpan = s
		}
	}
	clients := 0
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindClient {
			clients++
			if s.Parent().SpanID() != callSpan.SpanContext().SpanID() {
				t.Errorf("otelhttp's span %q is not a child of the call span", s.Name())
			}
		}
	}
	if len(spans) != 4 || clients != 3 {
		t.Errorf("%d spans, %d of them CLIENT; want the call and its three attempts, each once", len(spans), clients)
	}
}

// With otelhttp outside, its one CLIENT span is the parent of the call
// span, whose attempts are still CLIENT spans of their own, each carrying
// its own trace context, not otelhttp's.
func TestOtelhttpOutside(t *testing.T) {
	base := twice429()
	r := newRecorded(base, Config{}, quickRetries)
	tp := r.tp
	outer := otelhttp.NewTransport(r.tr, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(propagation.TraceContext{}))
	resp, err := (&http.Client{Transport: outer}).Get("http://api.example.com/items")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	spans := r.spans.Ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want otelhttp's, the call's and three attempts", len(spans))
	}
	byID := map[trace.SpanID]int{}
	for i, s := range spans {
		byID[s.SpanContext().SpanID()] = i
	}
	for i, s := range spans[:3] {
		call := spans[byID[s.Parent().SpanID()]]
		outerSpan := spans[byID[call.Parent().SpanID()]]
		if s.SpanKind() != trace.SpanKindClient || call.SpanKind() != trace.SpanKindInternal || outerSpan.SpanKind() != trace.SpanKindClient {
			t.Errorf("attempt %d: %v under %v under %v; want client under the internal call span under otelhttp's client span", i+1, s.SpanKind(), call.SpanKind(), outerSpan.SpanKind())
		}
		if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; base.parents[i] != want {
			t.Errorf("attempt %d carried traceparent %q, want its own span's %q", i+1, base.parents[i], want)
		}
	}
}
