package otel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ratewise/ratewise"
	rwotel "github.com/ratewise/ratewise/otel"
)

// A call refused once (429), then answered, as a trace: the call's span,
// its two attempts, and between them the retry, its backoff, and its turn
// in the pace ratewise learned from the 429.
func Example() {
	var n atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer api.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tr := rwotel.New(http.DefaultTransport, rwotel.Config{TracerProvider: tp},
		ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: 10 * time.Millisecond}))
	defer tr.Close()

	ctx := rwotel.WithURLTemplate(context.Background(), "/cards/{id}")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+"/cards/7", nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	printTree(spans.Ended())
	// Output:
	// ratewise GET /cards/{id} (internal) ratewise.call.attempts=2 http.response.status_code=200
	//   GET /cards/{id} (client) http.response.status_code=429 error.type=429
	//   event ratewise.retry ratewise.retry.reason=429
	//   event ratewise.wait ratewise.wait.kind=backoff
	//   GET /cards/{id} (client) http.response.status_code=200 http.request.resend_count=1
}

// printTree prints each root span, then its children and events in the
// order they happened, with a few attributes each.
func printTree(spans []sdktrace.ReadOnlySpan) {
	shown := []attribute.Key{"ratewise.call.attempts", "http.response.status_code", "error.type",
		"http.request.resend_count", "ratewise.retry.reason", "ratewise.wait.kind", "ratewise.scope"}
	line := func(indent, head string, attrs []attribute.KeyValue) {
		var parts []string
		for _, k := range shown {
			for _, a := range attrs {
				if a.Key == k {
					parts = append(parts, string(k)+"="+a.Value.String())
				}
			}
		}
		fmt.Println(strings.TrimRight(indent+head+" "+strings.Join(parts, " "), " "))
	}
	for _, root := range spans {
		if root.Parent().IsValid() {
			continue
		}
		line("", root.Name()+" ("+root.SpanKind().String()+")", root.Attributes())
		type item struct {
			at   time.Time
			show func()
		}
		var items []item
		for _, s := range spans {
			if s.Parent().SpanID() == root.SpanContext().SpanID() {
				items = append(items, item{s.StartTime(), func() { line("  ", s.Name()+" ("+s.SpanKind().String()+")", s.Attributes()) }})
			}
		}
		for _, e := range root.Events() {
			items = append(items, item{e.Time, func() { line("  ", "event "+e.Name, e.Attributes) }})
		}
		slices.SortStableFunc(items, func(a, b item) int { return a.at.Compare(b.at) })
		for _, it := range items {
			it.show()
		}
	}
}

// With an empty Config, the transport reports to the global providers
// (otel.SetTracerProvider, otel.SetMeterProvider); none is set here, and
// the call goes as it would without them.
func Example_globalProviders() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer api.Close()

	tr := rwotel.New(http.DefaultTransport, rwotel.Config{}, // TracerProvider, MeterProvider: the globals
		ratewise.WithPreset(ratewise.Moderate())) // any ratewise options
	client := &http.Client{Transport: tr}
	defer tr.Close()

	resp, err := client.Get(api.URL + "/cards/7")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}
