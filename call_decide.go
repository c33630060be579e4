package ratewise

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/scopes"
)

// This file decides whether a failed attempt is tried again, and after
// how long: the delay, the network errors worth a retry, and the
// commitment that takes a retry and its wait from their budgets.

// responseDelay is the wait before retrying after rep: the policy's
// jittered backoff, raised to the server's hint unless IgnoreRetryAfter,
// or unless the refusal made the attempt's told window yield: the retry
// then takes its turn in the window's spread. A refusal with no hint that
// a cap the key learned explains is retried at once: the key's line holds
// the retry until one of its requests in flight ends, the time a cap's
// slot takes to free, which a backoff would overshoot.
func (c *call) responseDelay(rep *reply) time.Duration {
	if c.capped && !rep.hinted {
		return 0
	}
	delay := c.policy.jittered(c.attempts - 1)
	if !c.policy.IgnoreRetryAfter && !c.yielded && rep.hinted {
		delay = max(delay, rep.hint)
	}
	return delay
}

// refuseNetworkRetry returns nil when the attempt that failed with err may
// be tried again, and otherwise the error the call ends with: the context's
// when it is done, the base's when the request is not idempotent, the
// error is permanent, or the retries are spent.
func (c *call) refuseNetworkRetry(err error) error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return err
		}
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	c.networkRetries++
	limit := max(c.policy.NetworkRetries, 0) // NoNetworkRetries is -1
	if c.networkRetries <= limit && c.attempts < c.policy.MaxAttempts && c.replayable &&
		isIdempotent(c.req) && err != errNoResponse && !isPermanent(err) {
		return nil
	}
	if c.attempts > 1 {
		return fmt.Errorf("ratewise: giving up after %d attempts: %w", c.attempts, err)
	}
	return err
}

// errBodyAgain marks a retry refused because the request body could not be
// had again.
var errBodyAgain = errors.New("cannot get the request body again")

// planRetry commits to a retry after delay: it takes a retry from the
// host's retry budget, the wait from the wait budget, and gets a fresh
// body for the next request. When any fails it takes nothing and returns
// why. A paced retry, of a refusal whose wait hint it waits out or that
// a cap the key learned holds in line, takes nothing from the retry
// budget: it goes when the server said it may, adding nothing to what
// the server lets through, while the budget bounds what retries add to
// a server that fails.
func (c *call) planRetry(delay time.Duration, paced bool) (*http.Request, error) {
	if !paced && !c.takeRetry() {
		return nil, ErrRetryBudgetExhausted
	}
	if err := c.reserve(delay); err != nil {
		c.returnUnsentRetry()
		return nil, err
	}
	next, err := c.nextRequest()
	if err != nil {
		c.returnUnsentRetry()
		c.giveBack(delay)
		return nil, fmt.Errorf("%w: %w", errBodyAgain, err)
	}
	return next, nil
}

// isPermanent reports whether a network error is one that retrying cannot
// fix (an untrusted certificate, an unsupported scheme, an invalid header,
// a redirect loop), by go-retryablehttp's classification. That
// classification reads only the *url.Error an http.Client returns and the
// error right under it, so each error of the wrap chain is shown to it in
// turn, as a *url.Error (its URL left out: only the cause is read). A
// certificate error under a proxy's or another RoundTripper's wrapping is
// then found too.
func isPermanent(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		uerr, ok := e.(*url.Error)
		if !ok {
			uerr = &url.Error{Op: "Do", Err: e}
		}
		if retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), nil, uerr); !retry {
			return true
		}
	}
	return false
}

// isIdempotent reports whether req may be sent again after a network error
// left its fate unknown: RFC 9110's idempotent methods, or any method with
// an Idempotency-Key header.
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}

// What follows feeds an attempt's outcome back to the layers: the breaker,
// the pause gate and the learned pace.

// feedBack tells the layers how the attempt went: the breaker its outcome,
// the pause gate the server's wait hint. A failed attempt frees its
// concurrency slots at once; a response keeps them until its body closes.
func (c *call) feedBack(rep *reply) {
	resp, err, class := rep.resp, rep.err, rep.class
	c.capped = false
	probed := c.ticket.Probe()
	if c.t.breakers != nil {
		c.tellBreaker(rep)
	}
	// hint is the server's wait hint on a refusal it is honoured for.
	var hint time.Duration
	now := rep.at // zero when nothing needed the time
	if err == nil && class != Final && !c.policy.IgnoreRetryAfter {
		hint = c.honouredHint(rep)
		if c.t.hintLog != nil {
			c.t.hintLog.check(resp, now, c.host(), c.endpoint)
		}
	}
	c.yielded = err == nil && class.refusal() && c.window != nil
	early := false // the refused turn was one a server's turn freed early
	if c.yielded {
		c.windowProbe = false // the yield answers it
		// The window stands for the server's quota as a user read it; its
		// refusal says the server counts more strictly, which a spread of
		// the same quota answers sooner than the refusal's hint
		// (scopes.Scope.Yield).
		// A reset already past, cut to its second, says the server's
		// window is about to turn: a window opened by a request that
		// reached it late (limit's late.go).
		due := headers.ReadCount(resp.Header, rep.at).ResetDue
		early = c.window.Yield(c.windowKey, c.windowStart, rep.at, due)
	} else {
		if c.window != nil && err == nil {
			now = c.alignWindow(resp, now)
		}
		c.answerProbe(err == nil)
	}
	// A request a told limit paces teaches only by its refusals: a
	// server that never refuses under the told limit keeps it, to the
	// letter; a refusal of a turn its window gave early, by a reset cut to
	// its second, is the window's own, and teaches nothing.
	if c.learns && err == nil && (class.refusal() && !early || !c.told.On && (rep.quota || c.sampleQuota(resp))) {
		if now.IsZero() {
			now = time.Now()
		}
		c.learnUntracked(resp, class, hint, now)
	}
	if c.learns && err == nil && !class.refusal() && c.t.shared.Trials() {
		if now.IsZero() {
			now = time.Now()
		}
		if c.t.shared.TrialRuns(now) {
			c.trialAnswered(resp, now) // a refusal's trial takes it (internal/scopes)
		}
	}
	// A hint pauses the key's other requests too: all of them when
	// nothing paces the request, else only a hint of more than a second,
	// and not once the key's learned pace has seen its server's hints
	// overstate when its quota comes back, nor when the key's told window
	// yields: its spread answers the hint.
	pausesKey := !c.yielded && hint > 0 && c.t.gate != nil && (hint > time.Second || !c.paced())
	var heldUntil time.Time // a learned window's hold, when later than the hint's
	if c.adaptive.n > 0 {
		// Only a call an adaptive scope paced holds a ticket: the others
		// skip the drain and the clock.
		closed := probed && err == nil && class == Final
		if now.IsZero() {
			now = time.Now()
		}
		an := scopes.Answer{Resp: resp, Err: err, Refused: err == nil && class.refusal(), Hint: hint}
		c.adaptive.drain(func(t scopes.Ticket) {
			fx := t.Finish(c.ctx, an, closed, now)
			pausesKey = pausesKey && fx.HintPauses
			c.capped = c.capped || fx.Capped
			// A window the key learned is held for every transport
			// sharing the gate's store, as a hint's pause is.
			if c.t.gate != nil && c.t.gate.Store() != nil && fx.HeldUntil.After(now) {
				pausesKey, heldUntil = true, fx.HeldUntil
			}
		})
	}
	if pausesKey {
		c.t.gate.Pause(c.ctx, c.gateKey(), laterOf(now.Add(hint), heldUntil))
	}
	if err != nil {
		c.held.release()
	}
}

// learnUntracked tells every adaptive scope the request passed unpaced
// (its key had learned nothing when it was admitted, or a told limit
// paced it) of a rate-limit signal in its answer at now: a refusal, or a
// count of the server's quota. The key's learning starts with it. hint is
// the refusal's wait hint.
func (c *call) learnUntracked(resp *http.Response, class Class, hint time.Duration, now time.Time) {
	an := scopes.Answer{Resp: resp, Refused: class.refusal(), Hint: hint}
	r := c.scopeRequest()
	c.eachUnpaced(func(s *scope, held scopes.Ticket) {
		c.capped = s.Untracked(&r, s.key(c.req), an, held, now) || c.capped
	})
}

// trialAnswered gives the answer to a request, neither refused nor an
// error, to the trials of the keys it was sent unpaced under.
func (c *call) trialAnswered(resp *http.Response, now time.Time) {
	r := c.scopeRequest()
	c.eachUnpaced(func(s *scope, _ scopes.Ticket) { s.TrialAnswered(&r, s.key(c.req), resp, now) })
}

// eachUnpaced calls f for every adaptive scope that applies to the
// request and did not pace it, with the ticket of its slow start the
// attempt holds, if any: their answers teach those scopes by hand.
func (c *call) eachUnpaced(f func(s *scope, held scopes.Ticket)) {
	for _, s := range c.t.scopes() {
		if !s.Adaptive() || !s.appliesTo(c.req) {
			continue
		}
		held, _ := c.adaptive.find(func(t scopes.Ticket) bool { return t.Of(s.Scope) })
		if !held.Paced() {
			f(s, held)
		}
	}
}

// quotaSampleEvery is how often, one response in this many, the answer to
// a request paced by nothing is read for a count of the server's quota:
// reading every one would cost a key that is never throttled more than
// the whole transport, and a server that counts does so on every answer.
const quotaSampleEvery = 16

// quotaReadFirst is how many of a transport's first answers are all read
// for a count: a transport is most often made for one API, whose first
// answers then say what its first wave may take.
const quotaReadFirst = 64

// sampleQuota reports whether resp, an answer to a request no adaptive
// scope paced, is read for a count of the server's quota.
func (c *call) sampleQuota(resp *http.Response) bool { return sampleQuota(resp, c.sent) }

// alignWindow tells the told window that gave the attempt its turn when
// the server's window that counted it ends, as the count of its answer
// resp says (scopes.Scope.Align), for the answers sampleQuota reads: the
// transport's first ones, then one in quotaSampleEvery. Every answer of
// a server's window says the same end, and a count read costs a request
// more than its turn of the window. It returns now, read when it was
// zero.
func (c *call) alignWindow(resp *http.Response, now time.Time) time.Time {
	if !c.sampleQuota(resp) {
		return now
	}
	if now.IsZero() {
		now = time.Now()
	}
	c.window.Align(c.windowKey, c.windowStart, resp.Header, now)
	return now
}

// sampleQuota reports whether resp, the answer to the transport's sent-th
// attempt, is read for a count of the server's quota: all of the
// transport's first answers, then one in quotaSampleEvery.
func sampleQuota(resp *http.Response, sent int64) bool {
	// inlines: most answers carry no header at all here
	return len(resp.Header) > 0 && (sent <= quotaReadFirst || rand.Uint32()%quotaSampleEvery == 0)
}

// depositRetryShare pays the share of a first attempt into its host's
// retry balance, when the host has one (retry_budget.go).
func (c *call) depositRetryShare() { c.t.depositRetryShare(c.req, c.policy) }

// depositRetryShare pays the share of req's first attempt under policy p
// into its host's retry balance, when the host has one.
func (t *Transport) depositRetryShare(req *http.Request, p *RetryPolicy) {
	// No host has a balance until one retries: then nothing to look up.
	if p.RetryBudget >= 0 && t.retryBudgets.Len() > 0 {
		t.creditRetry(req.URL.Host, p.RetryBudget)
	}
}

// takeRetry takes one retry from the host's retry balance, and reports
// whether there was one.
func (c *call) takeRetry() bool {
	if !c.t.takeRetry(c.req.URL.Host, c.policy) {
		return false
	}
	c.retryTaken = c.policy.RetryBudget >= 0
	return true
}

// returnUnsentRetry gives back a retry the call took but never sent: its
// wait or its admission was refused, or the context ended. Not the
// policy's say: a SetRetryPolicy since may have turned the budget off,
// and the retry was still taken from the balance.
func (c *call) returnUnsentRetry() {
	if c.retryTaken {
		c.retryTaken = false
		c.t.creditRetry(c.req.URL.Host, 1)
	}
}
