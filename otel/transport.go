package otel

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/ratewise/ratewise"
)

// This file is the transport: a call span around ratewise, and an attempt
// span around each request ratewise hands its base transport.

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/ratewise/ratewise/otel"

// Config says where the spans and metrics go. The zero value uses
// OpenTelemetry's global providers and propagator, read when New is
// called.
type Config struct {
	// TracerProvider makes the spans; nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics; nil means otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes each attempt's trace context into its headers;
	// nil means otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
	// NoAttemptSpans leaves the attempts' CLIENT spans, their headers and
	// http.client.request.duration to the base transport: set it when the
	// base is otelhttp.NewTransport, whose spans are then the children of
	// the call span. Without it, ratewise's attempt spans and otelhttp's
	// would double.
	NoAttemptSpans bool
}

// Transport is a ratewise transport that reports to OpenTelemetry: an
// INTERNAL span for each call, with its waits as events and its outcome
// as attributes; a CLIENT span for each attempt sent, after the stable
// HTTP conventions, its trace context in the attempt's headers; and the
// metrics listed in the package doc. It is safe for concurrent use.
type Transport struct {
	rw     *ratewise.Transport
	tracer trace.Tracer
	m      *instruments
}

// New returns a ratewise transport on base, built with opts as
// ratewise.New builds it, reporting to the providers of cfg. Its calls
// and their attempts are spans; see [Transport].
func New(base http.RoundTripper, cfg Config, opts ...ratewise.Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	tp, mp, prop := cfg.TracerProvider, cfg.MeterProvider, cfg.Propagator
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	t := &Transport{tracer: tp.Tracer(ScopeName), m: newInstruments(mp.Meter(ScopeName))}
	if _, noop := tp.(tracenoop.TracerProvider); noop {
		t.tracer = nil // no span of its own; a caller's trace context still goes on
	}
	// A meter provider that records nothing (a no-op one) gets no hooks,
	// so that ratewise builds nothing for them.
	metered := cfg.MeterProvider == nil || t.m.enabled()
	if !cfg.NoAttemptSpans {
		base = &attemptTransport{base: base, tracer: t.tracer, prop: prop, m: t.m}
	}
	if !metered {
		t.rw = ratewise.New(base, opts...)
		return t
	}
	t.rw = ratewise.New(base, slices.Concat(opts, []ratewise.Option{ratewise.WithTrace(t.m.trace())})...)
	t.m.observe(t.rw)
	return t
}

// Ratewise returns the ratewise transport within, for its status, stats
// and reloads.
func (t *Transport) Ratewise() *ratewise.Transport { return t.rw }

// CloseIdleConnections closes the idle connections of the base transport.
func (t *Transport) CloseIdleConnections() { t.rw.CloseIdleConnections() }

// Close stops reporting the transport's gauges (breaker states, learned
// limits) to the meter provider; its calls keep working.
func (t *Transport) Close() error { return t.m.close() }

// RoundTrip makes the call through ratewise within a span of its own,
// kind INTERNAL (the conventions keep CLIENT for what is sent on the
// wire), named "ratewise {method}" or "ratewise {method} {url.template}"
// when the context carries one (WithURLTemplate). When the call ends the
// span carries its attempts, the time it waited, why it gave up, and the
// final status; it is an error when the call returns an error or gives
// up.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.tracer == nil {
		return t.rw.RoundTrip(req) // the attempts carry the caller's trace context, if any
	}
	ctx := req.Context()
	method := methodAttrs(req.Method)
	ctx, span := t.tracer.Start(ctx, "ratewise "+spanName(method, urlTemplate(ctx)), trace.WithSpanKind(trace.SpanKindInternal))
	defer span.End()
	if !span.IsRecording() {
		if !span.SpanContext().IsValid() {
			return t.rw.RoundTrip(req) // nothing to carry: no trace, or no SDK
		}
		return t.rw.RoundTrip(req.WithContext(ctx))
	}
	// The attributes are set once the span records, so that a call that is
	// not sampled does not pay for them (a sampler does not see them).
	span.SetAttributes(requestAttrs(req, method)...)
	c := &call{span: span, req: req}
	ctx = context.WithValue(ctx, callKey{}, c)
	ctx = ratewise.WithCallTrace(ctx, c.trace())
	return t.rw.RoundTrip(req.WithContext(ctx))
}

// urlTemplateKey is the context key of WithURLTemplate.
type urlTemplateKey struct{}

// WithURLTemplate returns a context whose calls name their spans after
// template, such as "/cards/{id}", as the conventions' url.template: a
// route with the variable parts left as names, never the raw path.
func WithURLTemplate(ctx context.Context, template string) context.Context {
	return context.WithValue(ctx, urlTemplateKey{}, template)
}

func urlTemplate(ctx context.Context) string {
	s, _ := ctx.Value(urlTemplateKey{}).(string)
	return s
}

// attemptTransport makes a CLIENT span of each attempt ratewise sends,
// and records its duration.
type attemptTransport struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	m      *instruments
}

// RoundTrip sends one attempt within a CLIENT span named "{method}" or
// "{method} {url.template}", the trace context in a copy of the request's
// headers (the request itself is not changed). The span ends when the
// response's headers have come, or the attempt failed; its duration is
// the one http.client.request.duration records.
func (a *attemptTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	measured := a.m.duration.Enabled(ctx)
	if a.tracer == nil && !measured {
		// Nothing to record: only the caller's trace context, if any, to
		// carry on.
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			req = req.Clone(ctx)
			a.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
		}
		return a.base.RoundTrip(req)
	}
	method := methodAttrs(req.Method)
	resend := 0
	c, _ := ctx.Value(callKey{}).(*call)
	if c != nil {
		resend = int(c.attempts.Add(1)) - 1
	}
	start := time.Now()
	span := trace.SpanFromContext(ctx) // the caller's, when there is no tracer: it still goes on
	if a.tracer != nil {
		ctx, span = a.tracer.Start(ctx, spanName(method, urlTemplate(ctx)), trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start))
	}
	recording := a.tracer != nil && span.IsRecording()
	if recording {
		span.SetAttributes(requestAttrs(req, method)...)
		if resend > 0 {
			span.SetAttributes(semconv.HTTPRequestResendCount(resend))
		}
	}
	// What the base sends of its own with this context (a nested client)
	// is not this call's: neither its attempts nor its hooks. Only a call
	// whose span records put them in the context.
	if c != nil {
		ctx = ratewise.WithoutCallTrace(context.WithValue(ctx, callKey{}, (*call)(nil)))
	}
	switch {
	case span.SpanContext().IsValid():
		req = req.Clone(ctx)
		a.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	case ctx != req.Context():
		req = req.WithContext(ctx)
	}
	resp, err := a.base.RoundTrip(req)
	end := time.Now()
	if !recording && !measured {
		if a.tracer != nil {
			span.End(trace.WithTimestamp(end))
		}
		return resp, err
	}

	ends := make([]attribute.KeyValue, 0, 3)
	switch {
	case err != nil:
		ends = append(ends, semconv.ErrorType(err))
		if recording {
			span.SetStatus(codes.Error, ratewise.Redact(err.Error(), req))
		}
	default:
		ends = append(ends, semconv.HTTPResponseStatusCode(resp.StatusCode), protocolVersion(resp))
		if resp.StatusCode >= 400 {
			ends = append(ends, semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
			if recording {
				span.SetStatus(codes.Error, "")
			}
		}
	}
	if recording {
		span.SetAttributes(ends...)
	}
	if a.tracer != nil {
		span.End(trace.WithTimestamp(end))
	}
	if measured {
		a.m.attempt(ctx, end.Sub(start), req, method, ends)
	}
	return resp, err
}

// protocolVersion is network.protocol.version of resp: "1.1", "2".
func protocolVersion(resp *http.Response) attribute.KeyValue {
	if resp.ProtoMinor == 0 && resp.ProtoMajor >= 2 {
		return semconv.NetworkProtocolVersion(strconv.Itoa(resp.ProtoMajor))
	}
	return semconv.NetworkProtocolVersion(strconv.Itoa(resp.ProtoMajor) + "." + strconv.Itoa(resp.ProtoMinor))
}
