// Package prometheus exports the counters of a ratewise Transport as
// Prometheus metrics. It is its own module, so that the core library does
// not depend on the Prometheus client:
//
//	import rwprom "github.com/ratewise/ratewise/prometheus"
//
//	tr := ratewise.New(http.DefaultTransport, ratewise.WithPreset(ratewise.Moderate()))
//	collector := rwprom.NewCollector(tr)
//	prometheus.MustRegister(collector) // served by promhttp.Handler()
//
// The metrics:
//
//	ratewise_calls_total                               calls
//	ratewise_attempts_total                            requests sent, retries included
//	ratewise_retries_total{reason}                     retries, by the status that caused them or "network error"
//	ratewise_rate_limit_hits_total{key}                rate-limited responses, by host
//	ratewise_waits_total{kind}                         waits: backoff, cooldown, pacing, concurrency, breaker
//	ratewise_wait_duration_seconds{kind}               histogram of waits, 0.1 s to 60 s
//	ratewise_aborts_total{reason}                      calls given up, by reason
//	ratewise_breaker_state{key}                        0 closed, 1 half-open, 2 open
//	ratewise_breaker_cooldown_remaining_seconds{key}   until an open breaker lets a probe through
//
// Label values of keys are bounded: at most MaxKeys hosts are named, the
// rest are counted under "other".
//
// NewAdmissionCollector does the same for an admission.Handler, the
// inbound limiter of a server: ratewise_admission_* metrics, by scope.
//
// # Admission metrics
//
// AdmissionCollector is a prometheus.Collector for one admission.Handler,
// ratewise's inbound limiter:
//
//	ratewise_admission_requests_total{outcome}                 requests: admitted, refused, exempt
//	ratewise_admission_admitted_total{scope}                   requests each scope admitted
//	ratewise_admission_queued_total{scope}                     requests each scope made wait
//	ratewise_admission_refused_total{scope,reason}             refusals: limit, max-wait, max-queue, canceled, store-unavailable
//	ratewise_admission_queue_depth{scope}                      requests waiting now
//	ratewise_admission_wait_duration_seconds{scope}            histogram of the waits of queued requests let through
//	ratewise_admission_store_outages_total{scope}              outages of the scope's store
//	ratewise_admission_store_fallbacks_total{scope}            turns taken locally while the store failed
//
// Its labels are bounded: the scopes are the Handler's, the reasons five.
// It reads the Handler's counters when scraped (admission.Handler.Stats).
package prometheus

import (
	"cmp"
	"slices"

	prom "github.com/prometheus/client_golang/prometheus"

	"github.com/ratewise/ratewise"
)

// DefaultMaxKeys is how many keys a Collector names unless told otherwise.
const DefaultMaxKeys = 50

// Collector is a prometheus.Collector for one ratewise Transport. It reads
// the transport's counters when scraped; counting costs the transport a
// few atomic adds per call whether or not it is scraped.
type Collector struct {
	tr      *ratewise.Transport
	maxKeys int

	calls, attempts, retries, hits, waits, aborts, waitSeconds, breakerState, breakerCooldown *prom.Desc
}

// Option configures a Collector.
type Option func(*collectorConfig)

type collectorConfig struct {
	maxKeys     int
	constLabels prom.Labels
}

// WithMaxKeys bounds how many keys (hosts) label the per-key metrics; the
// others are summed under "other". Zero or less means DefaultMaxKeys.
func WithMaxKeys(n int) Option { return func(c *collectorConfig) { c.maxKeys = n } }

// WithConstLabels adds labels to every metric, such as the name of the API
// a transport calls when a process has several.
func WithConstLabels(l prom.Labels) Option { return func(c *collectorConfig) { c.constLabels = l } }

// NewCollector returns a Collector for tr. Register it once per transport
// (give each its own WithConstLabels when a process registers several).
func NewCollector(tr *ratewise.Transport, opts ...Option) *Collector {
	cfg := collectorConfig{maxKeys: DefaultMaxKeys}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.maxKeys <= 0 {
		cfg.maxKeys = DefaultMaxKeys
	}
	desc := func(name, help string, labels ...string) *prom.Desc {
		return prom.NewDesc("ratewise_"+name, help, labels, cfg.constLabels)
	}
	return &Collector{
		tr:              tr,
		maxKeys:         cfg.maxKeys,
		calls:           desc("calls_total", "Calls made through the transport."),
		attempts:        desc("attempts_total", "Requests sent to the server, retries included."),
		retries:         desc("retries_total", "Retries, by the status that caused them or \"network error\".", "reason"),
		hits:            desc("rate_limit_hits_total", "Responses read as rate-limited, by key.", "key"),
		waits:           desc("waits_total", "Waits, by kind.", "kind"),
		waitSeconds:     desc("wait_duration_seconds", "How long waits lasted, by kind.", "kind"),
		aborts:          desc("aborts_total", "Calls that gave up, by reason.", "reason"),
		breakerState:    desc("breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open.", "key"),
		breakerCooldown: desc("breaker_cooldown_remaining_seconds", "Time until an open breaker lets a probe through.", "key"),
	}
}

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prom.Desc) {
	for _, d := range []*prom.Desc{c.calls, c.attempts, c.retries, c.hits, c.waits, c.waitSeconds, c.aborts,
		c.breakerState, c.breakerCooldown} {
		ch <- d
	}
}

// Collect sends the transport's metrics as they are now.
func (c *Collector) Collect(ch chan<- prom.Metric) {
	s := c.tr.Stats()
	counter := func(d *prom.Desc, v int64, labels ...string) {
		ch <- prom.MustNewConstMetric(d, prom.CounterValue, float64(v), labels...)
	}
	counter(c.calls, s.Calls)
	counter(c.attempts, s.Attempts)
	for reason, n := range s.RetriesByReason {
		counter(c.retries, n, reason)
	}
	for key, n := range boundKeys(s.RateLimitHitsByKey, c.maxKeys) {
		counter(c.hits, n, key)
	}
	for reason, n := range s.Aborts {
		counter(c.aborts, n, string(reason))
	}
	bounds := ratewise.WaitBuckets()
	for kind, w := range s.WaitsByKind {
		counter(c.waits, w.Count, kind)
		buckets := make(map[float64]uint64, len(bounds))
		for i, b := range bounds {
			buckets[b.Seconds()] = uint64(w.Buckets[i])
		}
		ch <- prom.MustNewConstHistogram(c.waitSeconds, uint64(w.Count), w.Total.Seconds(), buckets, kind)
	}
	c.collectBreakers(ch)
}

// collectBreakers sends the state of at most maxKeys breakers, the least
// healthy first; the others are folded into "other", which shows the
// worst state and the longest cooldown among them.
func (c *Collector) collectBreakers(ch chan<- prom.Metric) {
	statuses := c.tr.BreakerStatuses()
	// A key that is "other" itself goes with the rest, last: it cannot be
	// named beside the fold.
	named := func(b ratewise.BreakerStatus) int {
		if b.Key == "other" {
			return 1
		}
		return 0
	}
	slices.SortFunc(statuses, func(a, b ratewise.BreakerStatus) int {
		return cmp.Or(cmp.Compare(named(a), named(b)), cmp.Compare(stateValue(b.State), stateValue(a.State)), cmp.Compare(a.Key, b.Key))
	})
	send := func(key string, state ratewise.BreakerState, cooldown float64) {
		ch <- prom.MustNewConstMetric(c.breakerState, prom.GaugeValue, stateValue(state), key)
		ch <- prom.MustNewConstMetric(c.breakerCooldown, prom.GaugeValue, cooldown, key)
	}
	for i, b := range statuses {
		if i < c.maxKeys && named(b) == 0 {
			send(b.Key, b.State, b.ResetIn.Seconds())
			continue
		}
		var worst ratewise.BreakerState
		var longest float64
		for _, o := range statuses[i:] {
			if stateValue(o.State) > stateValue(worst) {
				worst = o.State
			}
			longest = max(longest, o.ResetIn.Seconds())
		}
		send("other", worst, longest)
		return
	}
}

// stateValue is a breaker state as a gauge's value.
func stateValue(s ratewise.BreakerState) float64 {
	switch s {
	case ratewise.BreakerHalfOpen:
		return 1
	case ratewise.BreakerOpen:
		return 2
	}
	return 0
}

// boundKeys keeps the max keys with the most counts, summing the others
// (and any "other" already there) under "other".
func boundKeys(counts map[string]int64, max int) map[string]int64 {
	if len(counts) <= max {
		return counts
	}
	type kv struct {
		key string
		n   int64
	}
	var all []kv
	var other int64
	for k, n := range counts {
		if k == "other" {
			other += n
			continue
		}
		all = append(all, kv{k, n})
	}
	slices.SortFunc(all, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.key, b.key)) })
	out := make(map[string]int64, max+1)
	for i, e := range all {
		if i < max {
			out[e.key] = e.n
		} else {
			other += e.n
		}
	}
	if other > 0 {
		out["other"] = other
	}
	return out
}
