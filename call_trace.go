package ratewise

import (
	"net/http"
	"time"
)

// This file is a call's side of the hooks (trace.go): each step of the
// call reported to the transport's Trace, then to the call's own.

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
