package ratewise

import (
	"fmt"
	"net/http"
	"time"
)

// Trace is a set of hooks into what the transport does, after
// net/http/httptrace: each field is optional. Attach one to every call with
// [WithTrace], or to the calls of a context with [WithCallTrace]; both are
// called, the transport's first. Hooks run in the goroutine of the call
// they describe, concurrently for concurrent calls: they must be safe for
// that, and must not block.
type Trace struct {
	// AttemptStarted is called as an attempt is handed to the base
	// RoundTripper, after every wait before it.
	AttemptStarted func(AttemptInfo)
	// ResponseClassified is called when an attempt ends: with its
	// response, as the retry policy reads it, or with its network error.
	ResponseClassified func(ResponseInfo)
	// RetryScheduled is called when the transport has decided to send a
	// request again, before it waits.
	RetryScheduled func(RetryInfo)
	// WaitStarted is called as a call starts to wait, and WaitEnded when
	// the wait ends, however it ends.
	WaitStarted func(WaitInfo)
	WaitEnded   func(WaitEndInfo)
	// BreakerStateChanged is called when a key's breaker changes state.
	// The trace given to WithTrace hears every change, in the goroutine
	// that found it: a request that caused it, a probe's timer, or a status
	// read (KeyStatus, BreakerStatuses) that saw an open breaker go
	// half-open. A trace given with WithCallTrace hears the changes its
	// call's attempts caused by their outcomes, in the call's goroutine.
	BreakerStateChanged func(BreakerChange)
	// CallGaveUp is called when a call ends without the answer it was
	// retrying for: attempts, budget or time ran out, or it was refused.
	// CallEnded is called as every call ends, after CallGaveUp.
	CallGaveUp func(CallEndInfo)
	CallEnded  func(CallEndInfo)
}

// WaitKind says what a call waits for.
type WaitKind uint8

const (
	// WaitBackoff is the delay before a retry: the policy's backoff,
	// raised to the server's hint.
	WaitBackoff WaitKind = iota
	// WaitPause holds a request while its key is paused by a server's
	// wait hint.
	WaitPause
	// WaitPacing is a request's turn in a limit scope's bucket or spacing.
	WaitPacing
	// WaitConcurrency is a wait for a concurrency slot.
	WaitConcurrency
	// WaitBreaker is a wait for an open breaker's reset, or for the
	// outcome of a half-open breaker's probe.
	WaitBreaker

	waitKinds = iota // how many kinds there are
)

// String returns "backoff", "pause", "pacing", "concurrency" or
// "breaker".
func (k WaitKind) String() string {
	switch k {
	case WaitBackoff:
		return "backoff"
	case WaitPause:
		return "pause"
	case WaitPacing:
		return "pacing"
	case WaitConcurrency:
		return "concurrency"
	case WaitBreaker:
		return "breaker"
	}
	return fmt.Sprintf("WaitKind(%d)", uint8(k))
}

// AttemptInfo describes an attempt as it is sent.
type AttemptInfo struct {
	// Attempt is the attempt's number, from 1, of at most MaxAttempts.
	Attempt, MaxAttempts int
	Method               string
	// Key is the request's host; Endpoint the call's label from
	// WithEndpoint, or "".
	Key, Endpoint string
}

// ResponseInfo describes how an attempt ended.
type ResponseInfo struct {
	Attempt int
	// StatusCode is the response's status, 0 after a network error.
	StatusCode int
	// Class is the retry policy's reading of the response.
	Class Class
	// Hint is the wait the response asked for (see WaitHint), 0 when none.
	Hint time.Duration
	// Err is the network error, when there was no response.
	Err           error
	Key, Endpoint string
}

// WaitInfo describes a wait as it starts.
type WaitInfo struct {
	Kind WaitKind
	// Delay is the planned length; 0 for a concurrency slot, whose wait
	// lasts until one frees up.
	Delay time.Duration
	// Attempt is the number of the attempt the wait comes before, from 1.
	Attempt       int
	Key, Endpoint string
	// Scope is the Name of the limit scope a pacing or concurrency wait
	// is for; "" for the other kinds.
	Scope string
}

// WaitEndInfo describes a wait as it ends.
type WaitEndInfo struct {
	Kind WaitKind
	// Planned is the length the wait was started for (0 when unknown);
	// Waited how long it lasted.
	Planned, Waited time.Duration
	Attempt         int
	// Err is why the wait ended early: the context's error, or the budget
	// running out; nil when it ran its course.
	Err           error
	Key, Endpoint string
	// Scope is the Name of the limit scope a pacing or concurrency wait
	// is for; "" for the other kinds.
	Scope string
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
	Reason        string
	Key, Endpoint string
}

// BreakerChange describes a change of a key's breaker.
type BreakerChange struct {
	// Key is the breaker's key, as its KeyFunc returns it.
	Key      string
	From, To BreakerState
	// Level is the escalation level: 0 for Cooldown, i for
	// Escalation[i-1].
	Level int
	// OpenedAt is when the breaker last opened, this change included, and
	// Cause what opened it; zero before it first did.
	OpenedAt time.Time
	Cause    BreakerCause
	// ResetIn is, on a change to open, how long the breaker stays open.
	ResetIn time.Duration
}

// GiveUpReason says why a call ended without the answer it was retrying
// for; it is also the label of [Stats.Aborts].
type GiveUpReason string

// The reasons a call gives up.
const (
	// GiveUpAttempts: MaxAttempts were made, the last still refused.
	GiveUpAttempts GiveUpReason = "attempts"
	// GiveUpWaitBudget: the next wait did not fit in the call's wait
	// budget or before its context's deadline.
	GiveUpWaitBudget GiveUpReason = "wait_budget"
	// GiveUpRetryBudget: the host's retry budget had no retry left.
	GiveUpRetryBudget GiveUpReason = "retry_budget"
	// GiveUpBreakerOpen: the key's breaker was open.
	GiveUpBreakerOpen GiveUpReason = "breaker_open"
	// GiveUpLimit: a limit scope refused to queue the request.
	GiveUpLimit GiveUpReason = "limit"
	// GiveUpCanceled: the call's context ended.
	GiveUpCanceled GiveUpReason = "canceled"
	// GiveUpNetwork: a network error that is not retried, or no longer.
	GiveUpNetwork GiveUpReason = "network"
	// GiveUpBody: the request body cannot be sent again.
	GiveUpBody GiveUpReason = "body"
	// GiveUpBlocked: the server refused the client in a way the policy
	// reads as Blocked, which is not retried.
	GiveUpBlocked GiveUpReason = "blocked"
	// GiveUpInvalid: the call could not start: the transport's options or
	// the context's retry policy are invalid, or the request has no URL.
	GiveUpInvalid GiveUpReason = "invalid"
)

// giveUpReasons are the reasons, in the order Stats counts them.
var giveUpReasons = [...]GiveUpReason{GiveUpAttempts, GiveUpWaitBudget, GiveUpRetryBudget,
	GiveUpBreakerOpen, GiveUpLimit, GiveUpCanceled, GiveUpNetwork, GiveUpBody, GiveUpInvalid, GiveUpBlocked}

// CallEndInfo describes a call as it ends.
type CallEndInfo struct {
	// Attempts is the number of attempts sent; Waited the time the call
	// spent waiting.
	Attempts int
	Waited   time.Duration
	// StatusCode is the status of the response returned, 0 when an error
	// was.
	StatusCode int
	// Err is the error returned, if any.
	Err error
	// GaveUp is why the call gave up, "" when it ended with the answer it
	// was after (a response the policy does not retry).
	GaveUp        GiveUpReason
	Key, Endpoint string

	req *http.Request // for redacting Err
}

// WithTrace makes every call of the transport report to t; a trace given
// before is called first. See [Trace].
func WithTrace(t *Trace) Option {
	return func(tr *Transport) { tr.trace = composeTraces(tr.trace, t) }
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
		AttemptStarted:      composeHook(first.AttemptStarted, second.AttemptStarted),
		ResponseClassified:  composeHook(first.ResponseClassified, second.ResponseClassified),
		RetryScheduled:      composeHook(first.RetryScheduled, second.RetryScheduled),
		WaitStarted:         composeHook(first.WaitStarted, second.WaitStarted),
		WaitEnded:           composeHook(first.WaitEnded, second.WaitEnded),
		BreakerStateChanged: composeHook(first.BreakerStateChanged, second.BreakerStateChanged),
		CallGaveUp:          composeHook(first.CallGaveUp, second.CallGaveUp),
		CallEnded:           composeHook(first.CallEnded, second.CallEnded),
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

// fire calls a hook, chosen by hook, of the transport's trace and then of
// the call's, with v.
func fire[T any](c *call, hook func(*Trace) func(T), v T) {
	if t := c.t.trace; t != nil {
		if f := hook(t); f != nil {
			f(v)
		}
	}
	if t := c.trace; t != nil {
		if f := hook(t); f != nil {
			f(v)
		}
	}
}

// traceAttempt reports an attempt being sent.
func (c *call) traceAttempt() {
	fire(c, func(t *Trace) func(AttemptInfo) { return t.AttemptStarted }, AttemptInfo{Attempt: c.attempts,
		MaxAttempts: c.policy.MaxAttempts, Method: c.req.Method, Key: c.host(), Endpoint: c.endpoint})
}

// traceResponse reports how an attempt ended.
func (c *call) traceResponse(rep *reply) {
	info := ResponseInfo{Attempt: c.attempts, Class: rep.class, Err: rep.err, Key: c.host(), Endpoint: c.endpoint}
	if rep.resp != nil {
		info.StatusCode = rep.resp.StatusCode
		info.Hint = rep.hint
	}
	fire(c, func(t *Trace) func(ResponseInfo) { return t.ResponseClassified }, info)
}

// traceWait reports a wait starting, when the call is traced.
func (c *call) traceWait(kind WaitKind, d time.Duration) {
	if c.traced() {
		fire(c, func(t *Trace) func(WaitInfo) { return t.WaitStarted },
			WaitInfo{Kind: kind, Delay: d, Attempt: c.attempts + 1, Key: c.host(), Endpoint: c.endpoint, Scope: c.scopeName})
	}
}

// waitEnded counts a wait that lasted waited, planned for planned, and
// reports it when the call is traced.
func (c *call) waitEnded(kind WaitKind, planned, waited time.Duration, err error) {
	c.waited += waited
	c.stats.recordWait(waited)
	c.t.counters.recordWait(kind, waited)
	if c.traced() {
		fire(c, func(t *Trace) func(WaitEndInfo) { return t.WaitEnded }, WaitEndInfo{Kind: kind, Planned: planned,
			Waited: waited, Attempt: c.attempts + 1, Err: err, Key: c.host(), Endpoint: c.endpoint, Scope: c.scopeName})
	}
}

// traceRetry reports a retry decided on, when the call is traced.
func (c *call) traceRetry(delay time.Duration, resp *http.Response) {
	if !c.traced() {
		return
	}
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	fire(c, func(t *Trace) func(RetryInfo) { return t.RetryScheduled }, RetryInfo{Attempt: c.attempts,
		MaxAttempts: c.policy.MaxAttempts, Delay: delay, Reason: retryReason(status), Key: c.host(), Endpoint: c.endpoint})
}

// traceEnd reports the call's end.
func (c *call) traceEnd(resp *http.Response, err error) {
	info := CallEndInfo{Attempts: c.attempts, Waited: c.waited, Err: err, GaveUp: c.gaveUp,
		Key: c.host(), Endpoint: c.endpoint, req: c.req}
	if resp != nil {
		info.StatusCode = resp.StatusCode
	}
	if c.gaveUp != "" {
		fire(c, func(t *Trace) func(CallEndInfo) { return t.CallGaveUp }, info)
	}
	fire(c, func(t *Trace) func(CallEndInfo) { return t.CallEnded }, info)
}
