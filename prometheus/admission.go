package prometheus

import (
	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
)

// AdmissionCollector is a prometheus.Collector for one admission.Handler,
// ratewise's inbound limiter: requests by outcome, admissions, queueing,
// refusals by reason, queue depth, waits and store outages, per scope (see
// "Admission metrics" in the package doc). Its labels are bounded. It reads
// the Handler's counters when scraped.
type AdmissionCollector struct {
	h *admission.Handler

	requests, admitted, queued, refused, depth, waitSeconds, outages, fallbacks *prom.Desc
}

// NewAdmissionCollector returns an AdmissionCollector for h. Register it
// once per Handler (give each its own WithConstLabels when a process
// registers several). WithMaxKeys does not apply: the labels are bounded
// already.
func NewAdmissionCollector(h *admission.Handler, opts ...Option) *AdmissionCollector {
	var cfg collectorConfig
	for _, o := range opts {
		o(&cfg)
	}
	desc := func(name, help string, labels ...string) *prom.Desc {
		return prom.NewDesc("ratewise_admission_"+name, help, labels, cfg.constLabels)
	}
	return &AdmissionCollector{
		h:           h,
		requests:    desc("requests_total", "Requests the inbound limiter served, by outcome: admitted, refused or exempt.", "outcome"),
		admitted:    desc("admitted_total", "Requests a scope admitted and the limiter let through.", "scope"),
		queued:      desc("queued_total", "Requests a scope made wait for their turn.", "scope"),
		refused:     desc("refused_total", "Requests a scope refused, by reason.", "scope", "reason"),
		depth:       desc("queue_depth", "Requests waiting in a scope now.", "scope"),
		waitSeconds: desc("wait_duration_seconds", "How long queued requests that were let through waited.", "scope"),
		outages:     desc("store_outages_total", "Outages of a scope's shared store.", "scope"),
		fallbacks:   desc("store_fallbacks_total", "Turns a scope took from this process's own bucket while its store failed.", "scope"),
	}
}

// Describe sends the descriptions of every metric.
func (c *AdmissionCollector) Describe(ch chan<- *prom.Desc) {
	for _, d := range []*prom.Desc{c.requests, c.admitted, c.queued, c.refused, c.depth, c.waitSeconds, c.outages, c.fallbacks} {
		ch <- d
	}
}

// Collect sends the Handler's metrics as they are now.
func (c *AdmissionCollector) Collect(ch chan<- prom.Metric) {
	s := c.h.Stats()
	counter := func(d *prom.Desc, v int64, labels ...string) {
		ch <- prom.MustNewConstMetric(d, prom.CounterValue, float64(v), labels...)
	}
	counter(c.requests, s.Admitted, "admitted")
	counter(c.requests, s.Refused, "refused")
	counter(c.requests, s.Exempt, "exempt")
	bounds := ratewise.WaitBuckets()
	for _, sc := range s.Scopes {
		counter(c.admitted, sc.Admitted, sc.Name)
		counter(c.queued, sc.Queued, sc.Name)
		for reason, n := range sc.Refused {
			counter(c.refused, n, sc.Name, reason)
		}
		ch <- prom.MustNewConstMetric(c.depth, prom.GaugeValue, float64(sc.QueueDepth), sc.Name)
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b.Seconds()] = uint64(sc.Waits.Buckets[i])
		}
		ch <- prom.MustNewConstHistogram(c.waitSeconds, uint64(sc.Waits.Count), sc.Waits.Total.Seconds(), buckets, sc.Name)
		counter(c.outages, sc.StoreOutages, sc.Name)
		counter(c.fallbacks, sc.StoreFallbacks, sc.Name)
	}
}
