package otel

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/httpconv"

	"github.com/ratewise/ratewise"
)

// This file is the metrics: http.client.request.duration per attempt, by
// the conventions, and ratewise's own in the ratewise. namespace. Their
// key attribute, ratewise.key, is what ratewise keys its state by (a
// host, or a name the user chose), never a URL.

// MaxKeys bounds the keys each gauge reports: the learned rates of the
// first keys seen, and the first breakers ratewise lists. The counters
// and histograms take every key, as ratewise's own Stats do. A
// collection reads each of those keys' status (Transport.KeyStatus,
// BreakerStatuses): with a Store, that asks the store, a round trip per
// shared scope, pause and breaker of each key.
const MaxKeys = 256

// instruments are a transport's metrics.
type instruments struct {
	duration    httpconv.ClientRequestDuration
	calls       metric.Int64Counter
	retries     metric.Int64Histogram
	waited      metric.Float64Histogram
	refusals    metric.Int64Counter
	transitions metric.Int64Counter
	breaker     metric.Int64ObservableGauge
	learned     metric.Float64ObservableGauge
	meter       metric.Meter
	reg         metric.Registration

	keys  sync.Map     // the keys the gauges report, as keys
	nkeys atomic.Int64 // how many; at most about MaxKeys
}

// waitBuckets are the bounds of ratewise.client.wait.duration, in
// seconds: from a pacing turn of a few milliseconds to a minute-long
// pause.
var waitBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

func newInstruments(m metric.Meter) *instruments {
	in := &instruments{meter: m}
	// A meter that cannot make an instrument returns a no-op one with its
	// error: the transport then reports less, and works all the same.
	in.duration, _ = httpconv.NewClientRequestDuration(m)
	in.calls, _ = m.Int64Counter("ratewise.client.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Calls through ratewise, by outcome: ok, or the reason the call gave up."))
	in.retries, _ = m.Int64Histogram("ratewise.client.call.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Attempts after the first, per call."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 4, 5, 10))
	in.waited, _ = m.Float64Histogram("ratewise.client.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a call waited, by what it waited for: backoff, cooldown, pacing, concurrency, breaker."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	in.refusals, _ = m.Int64Counter("ratewise.client.refusals", metric.WithUnit("{response}"),
		metric.WithDescription("Responses read as refusals or failures, by class: rate-limited, blocked, retryable."))
	in.transitions, _ = m.Int64Counter("ratewise.client.breaker.transitions", metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of a key's breaker, from and to: closed, half-open, open."))
	in.breaker, _ = m.Int64ObservableGauge("ratewise.client.breaker.state", metric.WithUnit("{state}"),
		metric.WithDescription("A key's breaker: 0 closed, 1 half-open, 2 open."))
	in.learned, _ = m.Float64ObservableGauge("ratewise.client.limit.learned_rate", metric.WithUnit("{request}/s"),
		metric.WithDescription("The pace ratewise learned of a key's server, per second; absent while it has learned none."))
	return in
}

// Attributes of ratewise's metrics.
var (
	attrOutcome   = attribute.Key("ratewise.outcome")
	attrClass     = attribute.Key("ratewise.refusal.class")
	attrFrom      = attribute.Key("ratewise.breaker.from")
	attrTo        = attribute.Key("ratewise.breaker.to")
	attrScopeName = attribute.Key("ratewise.scope")
)

// attempt records an attempt's duration with the conventions'
// attributes: those of the request, and how it ended.
func (in *instruments) attempt(ctx context.Context, d time.Duration, req *http.Request, m method, ends []attribute.KeyValue) {
	host, port := serverOf(req)
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(m.name), semconv.ServerAddress(host),
		semconv.ServerPort(port), semconv.URLScheme(req.URL.Scheme))
	attrs = append(attrs, ends...)
	in.duration.RecordSet(ctx, d.Seconds(), attribute.NewSet(attrs...))
}

// trace is the transport's hooks that feed the counters and histograms.
func (in *instruments) trace() *ratewise.Trace {
	// The hooks build no attributes for an instrument nobody reads (a
	// no-op provider's).
	ctx := context.Background()
	return &ratewise.Trace{
		CallEnded: func(i ratewise.CallEndInfo) {
			in.seen(i.Key)
			if in.calls.Enabled(ctx) {
				outcome := "ok"
				if i.GaveUp != "" {
					outcome = string(i.GaveUp)
				}
				in.calls.Add(ctx, 1, metric.WithAttributes(attrKey.String(i.Key), attrOutcome.String(outcome)))
			}
			if in.retries.Enabled(ctx) {
				in.retries.Record(ctx, int64(max(i.Attempts-1, 0)), metric.WithAttributes(attrKey.String(i.Key)))
			}
		},
		WaitEnded: func(i ratewise.WaitEndInfo) {
			if in.waited.Enabled(ctx) {
				in.waited.Record(ctx, i.Waited.Seconds(), metric.WithAttributes(attrKey.String(i.Key), attrWaitKind.String(i.Kind.String())))
			}
		},
		ResponseClassified: func(i ratewise.ResponseInfo) {
			if i.Err == nil && i.Class != ratewise.Final && in.refusals.Enabled(ctx) {
				in.refusals.Add(ctx, 1, metric.WithAttributes(attrKey.String(i.Key), attrClass.String(i.Class.String())))
			}
		},
		BreakerStateChanged: func(c ratewise.BreakerChange) {
			if in.transitions.Enabled(ctx) {
				in.transitions.Add(ctx, 1, metric.WithAttributes(attrKey.String(c.Key),
					attrFrom.String(c.From.String()), attrTo.String(c.To.String())))
			}
		},
	}
}

// enabled reports whether any of the hooks' instruments records.
func (in *instruments) enabled() bool {
	ctx := context.Background()
	return in.calls.Enabled(ctx) || in.retries.Enabled(ctx) || in.waited.Enabled(ctx) ||
		in.refusals.Enabled(ctx) || in.transitions.Enabled(ctx)
}

// seen adds key to those the gauges report, up to MaxKeys (calls ending
// side by side may add a few more). A key seen before costs a lookup,
// no lock: it is called as every call ends.
func (in *instruments) seen(key string) {
	if _, ok := in.keys.Load(key); ok || in.nkeys.Load() >= MaxKeys {
		return
	}
	if _, loaded := in.keys.LoadOrStore(key, struct{}{}); !loaded {
		in.nkeys.Add(1)
	}
}

// observe reports the breakers' states and the learned limits of rw on
// each collection.
func (in *instruments) observe(rw *ratewise.Transport) {
	reg, err := in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		breakers := rw.BreakerStatuses()
		for _, b := range breakers[:min(len(breakers), MaxKeys)] {
			// BreakerState's values are the gauge's: 0 closed, 1 half-open, 2 open.
			o.ObserveInt64(in.breaker, int64(b.State), metric.WithAttributes(attrKey.String(b.Key)))
		}
		in.keys.Range(func(k, _ any) bool {
			key := k.(string)
			for _, s := range rw.KeyStatus(key).Scopes {
				if s.Adaptive && s.LearnedRate > 0 { // an adaptive scope's Rate is 0: its pace is LearnedRate
					o.ObserveFloat64(in.learned, s.LearnedRate, metric.WithAttributes(attrKey.String(key), attrScopeName.String(s.Name)))
				}
			}
			return true
		})
		return nil
	}, in.breaker, in.learned)
	if err == nil {
		in.reg = reg
	}
}

func (in *instruments) close() error {
	if in.reg == nil {
		return nil
	}
	return in.reg.Unregister()
}
