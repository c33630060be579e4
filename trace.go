package ratewise

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Trace is a set of hooks into what the transport does for a call, after
// net/http/httptrace: each field is optional. Attach one to a request's
// context with [WithCallTrace]. Hooks run in the goroutine of the call they
// describe, so the hooks of concurrent calls may run concurrently; they
// must not block.
type Trace struct {
	// WaitStarted is called as a call starts to wait.
	WaitStarted func(WaitInfo)
	// RetryScheduled is called when the transport has decided to send a
	// request again, before it waits.
	RetryScheduled func(RetryInfo)
}

// WaitKind says what a call waits for.
type WaitKind uint8

const (
	// WaitBackoff is the delay before a retry: the policy's backoff,
	// raised to the server's hint.
	WaitBackoff WaitKind = iota
	// WaitCooldown holds a request while its key is paused by a server's
	// wait hint.
	WaitCooldown
	// WaitPacing is a request's turn in a limit scope's bucket or spacing.
	WaitPacing
	// WaitConcurrency is a wait for a concurrency slot.
	WaitConcurrency
	// WaitBreaker is a wait for an open breaker's reset.
	WaitBreaker
)

// String returns "backoff", "cooldown", "pacing", "concurrency" or
// "breaker".
func (k WaitKind) String() string {
	switch k {
	case WaitBackoff:
		return "backoff"
	case WaitCooldown:
		return "cooldown"
	case WaitPacing:
		return "pacing"
	case WaitConcurrency:
		return "concurrency"
	case WaitBreaker:
		return "breaker"
	}
	return fmt.Sprintf("WaitKind(%d)", uint8(k))
}

// WaitInfo describes a wait as it starts.
type WaitInfo struct {
	Kind WaitKind
	// Delay is the planned length; 0 for a concurrency slot, whose wait
	// lasts until one frees up.
	Delay time.Duration
	// Attempt is the number of the attempt the wait comes before, from 1.
	Attempt int
	// Endpoint is the call's label from WithEndpoint, or "".
	Endpoint string
}

// RetryInfo describes a retry the transport has decided on.
type RetryInfo struct {
	// Attempt is the number of the attempt that failed, from 1, of at most
	// MaxAttempts.
	Attempt, MaxAttempts int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Reason is the failed attempt's status code ("429", "503") or
	// "network error".
	Reason string
	// Endpoint is the call's label from WithEndpoint, or "".
	Endpoint string
}

// WithCallTrace returns a context whose calls report to t. A trace already
// in ctx keeps being called, before t; neither is modified.
func WithCallTrace(ctx context.Context, t *Trace) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.trace = composeTraces(o.trace, t) })
}

// WithEndpoint returns a context whose calls carry the label name, such as
// "card" or "comments", in their trace events.
func WithEndpoint(ctx context.Context, name string) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.endpoint = name })
}

// composeTraces returns a trace calling first's hooks, then second's.
func composeTraces(first, second *Trace) *Trace {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return &Trace{
		WaitStarted:    composeHook(first.WaitStarted, second.WaitStarted),
		RetryScheduled: composeHook(first.RetryScheduled, second.RetryScheduled),
	}
}

func composeHook[T any](first, second func(T)) func(T) {
	switch {
	case first == nil:
		return second
	case second == nil:
		return first
	}
	return func(v T) { first(v); second(v) }
}

// traceWait reports a wait starting, when the call is traced.
func (c *call) traceWait(kind WaitKind, d time.Duration) {
	if c.trace != nil && c.trace.WaitStarted != nil {
		c.trace.WaitStarted(WaitInfo{Kind: kind, Delay: d, Attempt: c.attempts + 1, Endpoint: c.endpoint})
	}
}

// traceRetry reports a retry decided on, when the call is traced.
func (c *call) traceRetry(delay time.Duration, resp *http.Response) {
	if c.trace == nil || c.trace.RetryScheduled == nil {
		return
	}
	reason := "network error"
	if resp != nil {
		reason = strconv.Itoa(resp.StatusCode)
	}
	c.trace.RetryScheduled(RetryInfo{Attempt: c.attempts, MaxAttempts: c.policy.MaxAttempts, Delay: delay, Reason: reason, Endpoint: c.endpoint})
}
