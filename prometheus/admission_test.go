package prometheus

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
)

// adr-009, criterion "seen: the prometheus module exports admitted,
// refused and queued by scope, queue depth and a wait histogram, with
// bounded labels". Three requests from one client against a per-IP
// scope of 1 a second (refusing) and a global one of 1 every 2 s
// (queueing up to 5 s), and one to an exempt path: the metrics say what
// each scope did.
func TestAdmissionCollectorAfterAScriptedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, err := admission.New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			admission.WithLimit(admission.Limit{Name: "ip", Rate: 1, Burst: 1}),
			admission.WithLimit(admission.Limit{Name: "global", Rate: 0.5, Burst: 1, Key: ratewise.Global, MaxWait: 5 * time.Second}),
			admission.WithExemptPaths("/health"))
		if err != nil {
			t.Fatal(err)
		}
		serve := func(ctx context.Context, remote, path string) {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
			req.RemoteAddr = remote
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		serve(context.Background(), "192.0.2.1:1", "/")       // admitted
		serve(context.Background(), "192.0.2.1:1", "/")       // refused by ip
		serve(context.Background(), "192.0.2.1:1", "/health") // exempt
		var wg sync.WaitGroup
		wg.Go(func() { serve(context.Background(), "192.0.2.2:1", "/") }) // waits 2 s in global
		synctest.Wait()
		c := NewAdmissionCollector(h, WithConstLabels(prom.Labels{"service": "api"}))
		if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP ratewise_admission_queue_depth Requests waiting in a scope now.
# TYPE ratewise_admission_queue_depth gauge
ratewise_admission_queue_depth{scope="global",service="api"} 1
ratewise_admission_queue_depth{scope="ip",service="api"} 0
`), "ratewise_admission_queue_depth"); err != nil {
			t.Errorf("while one waits: %v", err)
		}
		wg.Wait()
		want := `
# HELP ratewise_admission_admitted_total Requests a scope admitted and the limiter let through.
# TYPE ratewise_admission_admitted_total counter
ratewise_admission_admitted_total{scope="global",service="api"} 2
ratewise_admission_admitted_total{scope="ip",service="api"} 2
# HELP ratewise_admission_queue_depth Requests waiting in a scope now.
# TYPE ratewise_admission_queue_depth gauge
ratewise_admission_queue_depth{scope="global",service="api"} 0
ratewise_admission_queue_depth{scope="ip",service="api"} 0
# HELP ratewise_admission_queued_total Requests a scope made wait for their turn.
# TYPE ratewise_admission_queued_total counter
ratewise_admission_queued_total{scope="global",service="api"} 1
ratewise_admission_queued_total{scope="ip",service="api"} 0
# HELP ratewise_admission_refused_total Requests a scope refused, by reason.
# TYPE ratewise_admission_refused_total counter
ratewise_admission_refused_total{reason="canceled",scope="global",service="api"} 0
ratewise_admission_refused_total{reason="canceled",scope="ip",service="api"} 0
ratewise_admission_refused_total{reason="limit",scope="global",service="api"} 0
ratewise_admission_refused_total{reason="limit",scope="ip",service="api"} 1
ratewise_admission_refused_total{reason="max-queue",scope="global",service="api"} 0
ratewise_admission_refused_total{reason="max-queue",scope="ip",service="api"} 0
ratewise_admission_refused_total{reason="max-wait",scope="global",service="api"} 0
ratewise_admission_refused_total{reason="max-wait",scope="ip",service="api"} 0
ratewise_admission_refused_total{reason="store-unavailable",scope="global",service="api"} 0
ratewise_admission_refused_total{reason="store-unavailable",scope="ip",service="api"} 0
# HELP ratewise_admission_requests_total Requests the inbound limiter served, by outcome: admitted, refused or exempt.
# TYPE ratewise_admission_requests_total counter
ratewise_admission_requests_total{outcome="admitted",service="api"} 2
ratewise_admission_requests_total{outcome="exempt",service="api"} 1
ratewise_admission_requests_total{outcome="refused",service="api"} 1
# HELP ratewise_admission_store_fallbacks_total Turns a scope took from this process's own bucket while its store failed.
# TYPE ratewise_admission_store_fallbacks_total counter
ratewise_admission_store_fallbacks_total{scope="global",service="api"} 0
ratewise_admission_store_fallbacks_total{scope="ip",service="api"} 0
# HELP ratewise_admission_store_outages_total Outages of a scope's shared store.
# TYPE ratewise_admission_store_outages_total counter
ratewise_admission_store_outages_total{scope="global",service="api"} 0
ratewise_admission_store_outages_total{scope="ip",service="api"} 0
# HELP ratewise_admission_wait_duration_seconds How long queued requests that were let through waited.
# TYPE ratewise_admission_wait_duration_seconds histogram
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="0.1"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="0.25"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="0.5"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="1"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="2.5"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="5"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="10"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="30"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="60"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="global",service="api",le="+Inf"} 1
ratewise_admission_wait_duration_seconds_sum{scope="global",service="api"} 2
ratewise_admission_wait_duration_seconds_count{scope="global",service="api"} 1
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="0.1"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="0.25"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="0.5"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="1"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="2.5"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="5"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="10"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="30"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="60"} 0
ratewise_admission_wait_duration_seconds_bucket{scope="ip",service="api",le="+Inf"} 0
ratewise_admission_wait_duration_seconds_sum{scope="ip",service="api"} 0
ratewise_admission_wait_duration_seconds_count{scope="ip",service="api"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
		if n := testutil.CollectAndCount(c); n != 3+2*(4+5+1+1) {
			t.Errorf("%d series, want 25: three outcomes, and per scope 4 counters, 5 reasons, a gauge and a histogram", n)
		}
	})
}
