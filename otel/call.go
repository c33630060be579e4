package otel

import (
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratewise/ratewise"
)

// This file is what a call's span says of it: its waits, its retries and
// its refusals as events, its outcome as attributes.
//
// Waits are events on the call span, not child spans: a wait is no
// operation and sends nothing, and as spans the waits of a call refused
// five times would outnumber its attempts in Jaeger's or Tempo's list of
// operations. Each event is stamped when its wait began and carries its
// duration, so that a trace view shows it at its place in the call's
// timeline, between the attempts around it.

// The attributes of ratewise's events and of the call span.
const (
	attrWaitKind     = attribute.Key("ratewise.wait.kind")
	attrWaitDuration = attribute.Key("ratewise.wait.duration") // seconds
	attrWaitPlanned  = attribute.Key("ratewise.wait.planned")  // seconds
	attrWaitHint     = attribute.Key("ratewise.wait.hint")     // seconds the server asked for
	attrWaitEndedBy  = attribute.Key("ratewise.wait.ended_by")
	attrKey          = attribute.Key("ratewise.key")
	attrEndpoint     = attribute.Key("ratewise.endpoint")
	attrAttempt      = attribute.Key("ratewise.attempt")
	attrRetryReason  = attribute.Key("ratewise.retry.reason")
	attrRetryDelay   = attribute.Key("ratewise.retry.delay") // seconds
	attrAttempts     = attribute.Key("ratewise.call.attempts")
	attrWaited       = attribute.Key("ratewise.call.waited") // seconds
	attrGiveUp       = attribute.Key("ratewise.call.give_up_reason")
	attrRefusedBy    = attribute.Key("ratewise.refused.by")
	attrRefusedWhy   = attribute.Key("ratewise.refused.reason")
	attrRefusedScope = attribute.Key("ratewise.refused.scope")
	attrRetryIn      = attribute.Key("ratewise.refused.retry_in") // seconds
)

// callKey is the context key of a call's state, for its attempts.
type callKey struct{}

// call is a call in flight whose span records.
type call struct {
	span     trace.Span
	req      *http.Request // for redacting errors
	attempts atomic.Int32  // attempts sent so far
	hint     atomic.Int64  // the last attempt's wait hint, in nanoseconds
}

// trace is the call's hooks into ratewise: each writes to the call span.
func (c *call) trace() *ratewise.Trace {
	return &ratewise.Trace{
		ResponseClassified: func(i ratewise.ResponseInfo) { c.hint.Store(int64(i.Hint)) },
		RetryScheduled:     c.retryScheduled,
		BreakerStateChanged: func(b ratewise.BreakerChange) {
			attrs := []attribute.KeyValue{attrKey.String(b.Key), attrFrom.String(b.From.String()), attrTo.String(b.To.String())}
			if b.To == ratewise.BreakerOpen {
				attrs = append(attrs, attrRetryIn.Float64(b.ResetIn.Seconds()), attribute.Int("ratewise.breaker.level", b.Level))
				if b.Cause.StatusCode != 0 {
					attrs = append(attrs, semconv.HTTPResponseStatusCode(b.Cause.StatusCode))
				}
			}
			c.span.AddEvent("ratewise.breaker", trace.WithAttributes(attrs...))
		},
		WaitEnded: c.waitEnded,
		CallEnded: c.ended,
	}
}

func (c *call) retryScheduled(i ratewise.RetryInfo) {
	c.span.AddEvent("ratewise.retry", trace.WithAttributes(
		attrAttempt.Int(i.Attempt), attrRetryReason.String(i.Reason), attrRetryDelay.Float64(i.Delay.Seconds())))
}

// waitEnded adds the wait as an event stamped when it began.
func (c *call) waitEnded(i ratewise.WaitEndInfo) {
	attrs := make([]attribute.KeyValue, 0, 7)
	attrs = append(attrs, attrWaitKind.String(i.Kind.String()), attrWaitDuration.Float64(i.Waited.Seconds()),
		attrAttempt.Int(i.Attempt), attrKey.String(i.Key))
	if i.Planned > 0 {
		attrs = append(attrs, attrWaitPlanned.Float64(i.Planned.Seconds()))
	}
	if hint := time.Duration(c.hint.Load()); i.Kind == ratewise.WaitBackoff && hint > 0 {
		attrs = append(attrs, attrWaitHint.Float64(hint.Seconds()))
	}
	if i.Endpoint != "" {
		attrs = append(attrs, attrEndpoint.String(i.Endpoint))
	}
	if i.Scope != "" {
		attrs = append(attrs, attrScopeName.String(i.Scope))
	}
	if i.Err != nil {
		attrs = append(attrs, attrWaitEndedBy.String(ratewise.Redact(i.Err.Error(), c.req)))
	}
	c.span.AddEvent("ratewise.wait", trace.WithTimestamp(time.Now().Add(-i.Waited)), trace.WithAttributes(attrs...))
}

// ended writes the call's outcome on its span: attempts, time waited,
// final status; why it gave up, and what refused it, as an error.
func (c *call) ended(i ratewise.CallEndInfo) {
	attrs := []attribute.KeyValue{attrAttempts.Int(i.Attempts), attrWaited.Float64(i.Waited.Seconds()), attrKey.String(i.Key)}
	if i.StatusCode != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(i.StatusCode))
	}
	if i.GaveUp != "" {
		attrs = append(attrs, attrGiveUp.String(string(i.GaveUp)))
	}
	var open *ratewise.CircuitOpenError
	var limit *ratewise.ClientLimitError
	switch {
	case errors.As(i.Err, &open):
		c.span.AddEvent("ratewise.refused", trace.WithAttributes(attrRefusedBy.String("breaker"),
			attrRefusedWhy.String(open.State.String()), attrRetryIn.Float64(open.ResetIn.Seconds())))
	case errors.As(i.Err, &limit):
		c.span.AddEvent("ratewise.refused", trace.WithAttributes(attrRefusedBy.String("limit"),
			attrRefusedWhy.String(string(limit.Reason)), attrRefusedScope.String(limit.Scope), attrRetryIn.Float64(limit.RetryIn.Seconds())))
	}
	switch {
	case i.Err != nil:
		attrs = append(attrs, semconv.ErrorType(i.Err))
		c.span.SetStatus(codes.Error, ratewise.Redact(i.Err.Error(), c.req))
	case i.GaveUp != "":
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(i.StatusCode)))
		c.span.SetStatus(codes.Error, "gave up: "+string(i.GaveUp))
	}
	c.span.SetAttributes(attrs...)
}
