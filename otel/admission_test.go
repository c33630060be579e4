package otel

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratewise/ratewise/admission"
)

// Behind otelhttp's handler, the limiter's queue waits and refusals are
// events on the server span, and its decisions are counted by scope; the
// key (here the client's address) is in neither.
func TestAdmissionDecisionsOnTheServerSpan(t *testing.T) {
	r := newRecorded(nil, Config{})
	limiter, err := admission.New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		admission.WithLimit(admission.Limit{Name: "per-ip", Rate: 20, Burst: 1, MaxWait: 60 * time.Millisecond, MaxQueue: 1}),
		admission.WithHooks(AdmissionHooks(Config{MeterProvider: r.mp})))
	if err != nil {
		t.Fatal(err)
	}
	h := otelhttp.NewHandler(limiter, "items", otelhttp.WithTracerProvider(r.tp))
	serve := func() int {
		req := httptest.NewRequest(http.MethodGet, "http://api.test/items", nil)
		req.RemoteAddr = "198.51.100.7:1234"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	// Four at once: one has the turn, one queues 50ms for the next, and
	// the queue (of one) is full for the other two.
	codes := make([]int, 4)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = serve() })
	}
	wg.Wait()

	events := map[string]int{}
	for _, s := range r.spans.Ended() {
		for _, e := range s.Events() {
			events[e.Name]++
			for _, a := range e.Attributes {
				if a.Value.String() == "198.51.100.7" {
					t.Errorf("event %s shows the client's address", e.Name)
				}
			}
		}
	}
	m := r.metrics(t)
	decisions, _ := m["ratewise.server.admission.decisions"].(metricdata.Sum[int64])
	byDecision := map[string]int64{}
	for _, dp := range decisions.DataPoints {
		v, _ := dp.Attributes.Value(attrDecision)
		byDecision[v.String()] += dp.Value
		if scope, _ := dp.Attributes.Value(attrScopeName); scope.String() != "per-ip" {
			t.Errorf("a decision of scope %q, want per-ip", scope.String())
		}
	}
	t.Logf("codes %v, events %v, decisions %v", codes, events, byDecision)
	if events["ratewise.admission.queued"] != int(byDecision["queued"]) || byDecision["queued"] == 0 {
		t.Errorf("%d queued events, %d queued decisions counted; want as many, and some", events["ratewise.admission.queued"], byDecision["queued"])
	}
	if events["ratewise.admission.refused"] != int(byDecision["refused"]) || byDecision["refused"] == 0 {
		t.Errorf("%d refused events, %d refusals counted; want as many, and some", events["ratewise.admission.refused"], byDecision["refused"])
	}
	refused := 0
	for _, c := range codes {
		if c == http.StatusTooManyRequests {
			refused++
		}
	}
	if int64(refused) != byDecision["refused"] || byDecision["admitted"] != int64(len(codes)-refused) {
		t.Errorf("codes %v; decisions counted %v", codes, byDecision)
	}
}
