package otel

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratewise/ratewise/admission"
)

// This file reports the inbound limiter: its decisions as metrics, and
// its queue waits and refusals as events on the server span of the
// request, started by otelhttp.NewHandler or any middleware before the
// limiter.

// The attributes of the admission metrics and events. A scope's key (a
// client's address, an API key) is never one of them: it may be a
// secret, and its values are unbounded.
const (
	attrDecision = attribute.Key("ratewise.admission.decision")
	attrReason   = attribute.Key("ratewise.admission.reason")
	attrWait     = attribute.Key("ratewise.admission.wait") // seconds
)

// AdmissionHooks returns hooks for admission.WithHooks that count the
// limiter's decisions and put them on the request's span, as events
// "ratewise.admission.queued" and "ratewise.admission.refused" (see
// "Admission" in the package doc). Only cfg's MeterProvider is used.
func AdmissionHooks(cfg Config) admission.Hooks {
	mp := cfg.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	decisions, _ := m.Int64Counter("ratewise.server.admission.decisions", metric.WithUnit("{request}"),
		metric.WithDescription("Decisions of the inbound limiter, per scope: admitted, queued or refused."))
	waits, _ := m.Float64Histogram("ratewise.server.admission.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long requests admitted after queueing waited in a scope."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	count := func(ctx context.Context, decision string, ev admission.Event) {
		if !decisions.Enabled(ctx) {
			return
		}
		attrs := []attribute.KeyValue{attrScopeName.String(ev.Scope), attrDecision.String(decision)}
		if ev.Reason != "" {
			attrs = append(attrs, attrReason.String(ev.Reason))
		}
		decisions.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
	return admission.Hooks{
		Admitted: func(ev admission.Event) {
			ctx := ev.Request.Context()
			count(ctx, "admitted", ev)
			if ev.Wait > 0 && waits.Enabled(ctx) {
				waits.Record(ctx, ev.Wait.Seconds(), metric.WithAttributes(attrScopeName.String(ev.Scope)))
			}
		},
		Queued: func(ev admission.Event) {
			ctx := ev.Request.Context()
			count(ctx, "queued", ev)
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent("ratewise.admission.queued", trace.WithAttributes(
					attrScopeName.String(ev.Scope), attrWait.Float64(ev.Wait.Seconds())))
			}
		},
		Refused: func(ev admission.Event) {
			ctx := ev.Request.Context()
			count(ctx, "refused", ev)
			if span := trace.SpanFromContext(ctx); span.IsRecording() {
				span.AddEvent("ratewise.admission.refused", trace.WithAttributes(
					attrScopeName.String(ev.Scope), attrReason.String(ev.Reason), attrWait.Float64(ev.Wait.Seconds())))
			}
		},
	}
}
