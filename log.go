package ratewise

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/keyed"
)

// WithLogger makes the transport log what it does to l, as structured
// events with stable keys (rate_retry, rate_wait, rate_success,
// rate_giveup, breaker_state, rate_hint_unreadable; see "Logging" in the
// package doc). No URL or body is logged, and no header but a wait hint
// that could not be read, once per key; errors go through [Redact]. An
// event whose level l does not enable is not built. Without WithLogger
// the library logs nothing.
func WithLogger(l *slog.Logger) Option {
	return func(t *Transport) {
		if l != nil {
			t.trace = composeTraces(t.trace, logTrace(l))
			if t.hintLog == nil {
				t.hintLog = &hintLog{logged: keyed.New[atomic.Bool](DefaultIdleTimeout, nil, nil)}
			}
			t.hintLog.loggers = append(t.hintLog.loggers, l)
		}
	}
}

// hintLog logs the wait hints a server sent that could not be read: once
// per key, not once per response, so that a server answering every
// request with a bad header does not flood the log. The mark that a key
// was logged is per-key state, evicted once the key has been idle for
// DefaultIdleTimeout, as the limit's and the gate's are: memory stays
// bounded however many keys come and go, and a key idle that long may be
// logged again.
type hintLog struct {
	loggers []*slog.Logger
	logged  *keyed.Map[atomic.Bool]
}

// maxLoggedHint is how much of an unreadable hint's value is logged: a
// server controls it, and a log line should stay a line.
const maxLoggedHint = 64

// check logs the first wait hint of resp, a response to a request of key
// whose hints the call reads, that could not be read, unless key had one
// logged already.
func (h *hintLog) check(resp *http.Response, now time.Time, key, endpoint string) {
	ctx := context.Background()
	if !h.enabled(ctx) {
		return
	}
	name, value, ok := headers.UnreadableHint(resp, now)
	if !ok {
		return
	}
	e := h.logged.Acquire(key, true)
	first := e.State.CompareAndSwap(false, true)
	h.logged.Release(e)
	if !first {
		return
	}
	if len(value) > maxLoggedHint {
		value = strings.ToValidUTF8(value[:maxLoggedHint], "") + "..."
	}
	for _, l := range h.loggers {
		l.LogAttrs(ctx, slog.LevelWarn, "wait hint unreadable: ignored",
			slog.String("event", "rate_hint_unreadable"), slog.String("header", name), slog.String("value", value),
			slog.Int("status", resp.StatusCode), slog.String("key", key), slog.String("endpoint", endpoint))
	}
}

// enabled reports whether a logger would log a hint's warning.
func (h *hintLog) enabled(ctx context.Context) bool {
	for _, l := range h.loggers {
		if l.Enabled(ctx, slog.LevelWarn) {
			return true
		}
	}
	return false
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

// This file keeps secrets out of what the transport reports: the last
// error of Stats and the events of WithLogger. An error from a base
// RoundTripper may quote the request's URL, and with it a password or a
// token in its query.

// redacted replaces a secret.
const redacted = "REDACTED"

// secretWords are the parts of a header's or query parameter's name that
// say it carries a credential ("sig" covers signature and api_sig).
const secretWords = `auth|key|token|secret|passw|pwd|session|cookie|sig|credential`

// secretName matches the names of headers and query parameters that carry
// credentials.
var secretName = regexp.MustCompile(`(?i)` + secretWords)

// Patterns that look like secrets wherever they appear: a URL's user
// info, a query parameter named like a credential, a bearer token.
var (
	userInfoPattern    = regexp.MustCompile(`(://)[^/@\s]+@`)
	secretParamPattern = regexp.MustCompile(`(?i)([?&;][^=&\s"']*(?:` + secretWords + `)[^=&\s"']*=)[^&\s"']+`)
	bearerPattern      = regexp.MustCompile(`(?i)(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{4,}`)
)

// Redact returns s with the secrets of req removed (the values of its
// credential headers, its URL's user info, its query parameters named
// like keys or tokens) and anything shaped like a secret: user info in a
// URL, a query parameter named like a key or token, a bearer token. Use it
// on any text about a request that leaves the process: an error, a log
// line. req may be nil.
func Redact(s string, req *http.Request) string {
	if req != nil {
		for _, v := range requestSecrets(req) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	s = userInfoPattern.ReplaceAllString(s, "${1}"+redacted+"@")
	s = secretParamPattern.ReplaceAllString(s, "${1}"+redacted)
	return bearerPattern.ReplaceAllString(s, "${1} "+redacted)
}

// redactError is Redact of err's text.
func redactError(err error, req *http.Request) string {
	return Redact(err.Error(), req)
}

// requestSecrets lists the secret values req carries, longest first so
// that one containing another is removed whole. Values of fewer than four
// characters are left: replacing them would garble the text more than it
// protects.
func requestSecrets(req *http.Request) []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	for name, values := range req.Header {
		if !secretName.MatchString(name) {
			continue
		}
		for _, v := range values {
			add(v)
			if _, token, ok := strings.Cut(v, " "); ok {
				add(strings.TrimSpace(token)) // "Bearer <token>"
			}
		}
	}
	if u := req.URL; u != nil {
		if u.User != nil {
			add(u.User.Username())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		for name, values := range u.Query() {
			if secretName.MatchString(name) {
				for _, v := range values {
					add(v)
					add(url.QueryEscape(v))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
