package prometheus_test

import (
	"fmt"
	"net/http"

	"github.com/jarcoal/httpmock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratewise/ratewise"
	rwprom "github.com/ratewise/ratewise/prometheus"
)

func ExampleNewCollector() {
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	tr := ratewise.New(mock)

	reg := prometheus.NewRegistry()
	collector := rwprom.NewCollector(tr)
	reg.MustRegister(collector)

	resp, err := (&http.Client{Transport: tr}).Get("https://api.example.com/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(testutil.CollectAndCount(collector, "ratewise_calls_total"), "series of calls")
	// Output: 1 series of calls
}

// The collector on the default registry, which promhttp.Handler()
// serves at /metrics.
func ExampleNewCollector_defaultRegistry() {
	tr := ratewise.New(http.DefaultTransport, ratewise.WithPreset(ratewise.Moderate()))
	collector := rwprom.NewCollector(tr)
	prometheus.MustRegister(collector) // served by promhttp.Handler()
	defer prometheus.Unregister(collector)

	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		if f.GetName() == "ratewise_calls_total" {
			fmt.Println(f.GetName(), f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output: ratewise_calls_total 0
}
