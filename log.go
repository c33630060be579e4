package ratewise

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// WithLogger makes the transport log what it does to l, as structured
// events with stable keys (rate_retry, rate_wait, rate_success,
// rate_giveup, breaker_state; see "Logging" in the package doc). No URL,
// header or body is logged, and errors go through [Redact]. An event whose
// level l does not enable is not built. Without WithLogger the library
// logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(t *Transport) {
		if l != nil {
			t.trace = composeTraces(t.trace, logTrace(l))
		}
	}
}

// logTrace is the trace that logs to l.
func logTrace(l *slog.Logger) *Trace {
	ctx := context.Background()
	return &Trace{
		RetryScheduled: func(r RetryInfo) {
			if !l.Enabled(ctx, slog.LevelInfo) {
				return
			}
			l.LogAttrs(ctx, slog.LevelInfo, "rate limited: retrying",
				slog.String("event", "rate_retry"), slog.Int("attempt", r.Attempt), slog.Int("max", r.MaxAttempts),
				slog.Int64("delay_ms", r.Delay.Milliseconds()), slog.String("reason", r.Reason),
				slog.String("key", r.Key), slog.String("endpoint", r.Endpoint))
		},
		WaitStarted: func(w WaitInfo) {
			if !l.Enabled(ctx, slog.LevelInfo) {
				return
			}
			msg := "Throttling: waiting for a " + w.Kind.String() + " slot"
			if w.Delay > 0 {
				msg = "Throttling: waiting " + strconv.FormatInt(w.Delay.Milliseconds(), 10) + "ms before next request"
			}
			l.LogAttrs(ctx, slog.LevelInfo, msg,
				slog.String("event", "rate_wait"), slog.String("kind", w.Kind.String()),
				slog.Int64("delay_ms", w.Delay.Milliseconds()), slog.Int("attempt", w.Attempt),
				slog.String("key", w.Key), slog.String("endpoint", w.Endpoint))
		},
		CallGaveUp: func(e CallEndInfo) {
			if !l.Enabled(ctx, slog.LevelWarn) {
				return
			}
			attrs := []slog.Attr{slog.String("event", "rate_giveup"), slog.String("reason", string(e.GaveUp)),
				slog.Int("attempts", e.Attempts), slog.Int64("total_wait_ms", e.Waited.Milliseconds()),
				slog.Int("status", e.StatusCode), slog.String("key", e.Key), slog.String("endpoint", e.Endpoint)}
			if e.Err != nil {
				attrs = append(attrs, slog.String("error", redactError(e.Err, e.req)))
			}
			l.LogAttrs(ctx, slog.LevelWarn, "rate limited: giving up", attrs...)
		},
		CallEnded: func(e CallEndInfo) {
			if e.GaveUp != "" {
				return
			}
			level := slog.LevelDebug
			if e.Attempts > 1 || e.Waited > 0 {
				level = slog.LevelInfo
			}
			if !l.Enabled(ctx, level) {
				return
			}
			l.LogAttrs(ctx, level, "request done",
				slog.String("event", "rate_success"), slog.Int("attempts", e.Attempts),
				slog.Int64("total_wait_ms", e.Waited.Milliseconds()), slog.Int("status", e.StatusCode),
				slog.String("key", e.Key), slog.String("endpoint", e.Endpoint))
		},
		BreakerStateChanged: func(b BreakerChange) {
			level := slog.LevelInfo
			if b.To == BreakerOpen {
				level = slog.LevelWarn
			}
			if !l.Enabled(ctx, level) {
				return
			}
			attrs := []slog.Attr{slog.String("event", "breaker_state"), slog.String("from", b.From.String()),
				slog.String("to", b.To.String()), slog.String("key", b.Key), slog.Int("breaker_level", b.Level)}
			if b.To == BreakerOpen {
				attrs = append(attrs, slog.Int64("reset_in_ms", b.ResetIn.Milliseconds()))
			}
			if !b.OpenedAt.IsZero() {
				attrs = append(attrs, slog.String("opened_at", b.OpenedAt.UTC().Format(time.RFC3339)),
					slog.Int("cause_status", b.Cause.StatusCode), slog.String("cause_class", b.Cause.Class.String()),
					slog.String("cause_detail", b.Cause.Detail))
			}
			l.LogAttrs(ctx, level, "circuit breaker "+b.To.String(), attrs...)
		},
	}
}
