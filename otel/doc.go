// Package otel reports what a ratewise transport does to OpenTelemetry:
// spans after the stable HTTP semantic conventions, every wait seen, and
// metrics. It is its own module, so that the core library takes no
// OpenTelemetry dependency:
//
//	import rwotel "github.com/ratewise/ratewise/otel"
//
//	tr := rwotel.New(http.DefaultTransport, rwotel.Config{}, // the global providers
//		ratewise.WithPreset(ratewise.Moderate()))
//	client := &http.Client{Transport: tr}
//
// Each call is an INTERNAL span, "ratewise GET", whose children are its
// attempts, one CLIENT span each, named "GET" (or "GET /cards/{id}" with
// WithURLTemplate), with http.request.method, server.address,
// server.port, url.full (credentials and secret query values redacted),
// http.response.status_code, error.type, network.protocol.version, and
// http.request.resend_count on every resend. Each attempt carries its
// span's trace context in its headers. The call span carries the call's
// outcome (ratewise.call.attempts, ratewise.call.waited in seconds,
// ratewise.call.give_up_reason, the final status), and as events:
//
//	ratewise.wait     each wait, stamped when it began: its kind (backoff, pause,
//	                  pacing, concurrency, breaker), duration, planned length, the
//	                  limit scope of a pacing or concurrency wait, the server's
//	                  hint that set a backoff, and what ended it early
//	ratewise.retry    each retry decided: the attempt that failed, why, the delay
//	ratewise.refused  a call refused by an open breaker or a limit, and why
//	ratewise.breaker  a breaker change the call's attempt caused: from, to, and
//	                  when opened, how long for, its level and the status that tripped it
//
// The metrics (ratewise.key is a host, or a key the user chose):
//
//	http.client.request.duration         per attempt, by the conventions (s)
//	ratewise.client.calls                calls, by ratewise.key and ratewise.outcome (ok or the give-up reason)
//	ratewise.client.call.retries         histogram of retries per call
//	ratewise.client.wait.duration        histogram of waits, by ratewise.wait.kind (s)
//	ratewise.client.refusals             responses read as rate-limited, blocked or retryable
//	ratewise.client.breaker.transitions  breaker changes, by ratewise.breaker.from and .to
//	ratewise.client.breaker.state        gauge: 0 closed, 1 half-open, 2 open
//	ratewise.client.limit.learned_rate   gauge: the pace learned of a key's server, per second
//
// With otelhttp: put otelhttp.NewTransport outside, and its one CLIENT
// span wraps the whole call, waits and all; give it as the base with
// Config.NoAttemptSpans, and its spans are the attempts, children of the
// call span (see docs/observability.md).
//
// # Admission
//
// AdmissionHooks returns hooks for admission.WithHooks that count the
// limiter's decisions and put them on the request's span:
//
//	ratewise.server.admission.decisions      requests, by ratewise.scope and
//	                                         ratewise.admission.decision (admitted, queued,
//	                                         refused) and, for a refusal, ratewise.admission.reason
//	ratewise.server.admission.wait.duration  histogram of the waits of the requests
//	                                         admitted after queueing (s)
//
// and on the span in the request's context, an event
// "ratewise.admission.queued" (the scope and the wait) or
// "ratewise.admission.refused" (the scope, the reason and when it would
// admit). Only cfg's MeterProvider is used: the spans are those of the
// middleware before the limiter.
package otel
