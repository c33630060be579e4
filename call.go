package ratewise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/scopes"
)

// This file is one call of RoundTrip: its state and its attempt loop,
// whose steps are named here (send, classify, and the decision that a
// response is final, or a call gives up) or in the files beside it:
// call_body.go prepares the body, call_prefetch.go asks a store the
// attempt's questions at once, call_admit.go admits an attempt
// (call_breaker.go through its breaker), call_decide.go tells the layers
// how it went and decides on a retry, call_wait.go times every wait, and
// call_trace.go reports each step to the hooks.

// call is the state of one RoundTrip. It lives on RoundTrip's stack, so a
// request that is not retried allocates nothing for it.
type call struct {
	t      *Transport
	policy *RetryPolicy
	// ownPolicy is set when the context gave the policy; otherwise each
	// attempt takes the transport's, which SetRetryPolicy may replace.
	ownPolicy bool
	req       *http.Request // the caller's request, never modified
	// pre is what a store that answers an attempt's questions together
	// answered (see prefetch); nil without one.
	pre *scopes.Prefetched
	out *http.Request // what the next attempt sends
	// waitBudget bounds every wait of the call, and holds its context
	// (c.ctx).
	waitBudget
	stats    *CallStats
	priority Priority
	trace    *Trace
	endpoint string
	// acquireKey is, for a call of Acquire, which sends no request, the
	// key its waits are traced under.
	acquireKey string
	// scopeName is the limit scope the call is being admitted by, for its
	// waits' trace; "" outside a scope's admission.
	scopeName string

	// How the body is sent again: req.GetBody, or bodyData when buffered;
	// replayable is false for a body that can be sent once only.
	replayable bool
	buffered   bool
	bodyData   []byte

	attempts       int
	sent           int64 // the transport's attempts, this one included
	networkRetries int
	retryTaken     bool          // a retry taken from the retry budget and not yet sent
	waited         time.Duration // waits so far, summed
	gaveUp         GiveUpReason  // why the call gave up, once it has

	// What the current attempt holds: its breaker ticket, concurrency
	// slots until its response body is closed, and the tickets of the
	// adaptive scopes that await its answer.
	ticket   breaker.Ticket
	held     heldSlots
	adaptive holds[scopes.Ticket]
	// learns is set when an adaptive scope applies to the request: its
	// answer may teach the scope (learnUntracked). With told, it says the
	// request is paced (paced), and then the pace, not the pause gate,
	// answers a wait hint of a second or less.
	learns bool
	// told is what the told limits (a Rate, a MinSpacing or a Window) of
	// the scopes that apply to the request say of it (scopes.Told): they
	// say what the key's first requests may take, so the learned scope
	// starts none slowly, and bound the wait for a pace learned under them.
	told scopes.Told
	// window is the told Window scope that gave the attempt a turn of its
	// count, at once with the window's others, and windowKey the
	// attempt's key there: a refusal of it makes the window yield
	// (scopes.Scope.Yield). Nil when no window gave one (the last, with several).
	window    *scope
	windowKey string
	// windowStart is the start the window's count took for the attempt:
	// the count of its answer may say when the server's window that
	// counted it ends (alignWindow).
	windowStart time.Time
	// windowProbe is set when that turn is the window's probe, whose
	// answer the window awaits (answerProbe).
	windowProbe bool
	// capped is set when a cap the key learned on its requests in
	// flight explains the attempt's refusal: its retry goes at once,
	// held by the key's line until there is room.
	capped bool
	// yielded is set when the attempt's refusal made its window yield:
	// the spread the window keeps from then on answers the refusal's
	// hint, which pauses neither the key nor the attempt's retry.
	yielded bool
	// gateKeyed is set once gateKeyV holds the request's pause key.
	gateKeyed bool
	gateKeyV  string
	// last is the previous attempt's response, its body kept in memory,
	// handed back if a wait before the next attempt is refused.
	last *http.Response
}

// init makes c the call of req through t, with the options o its
// context carries (nil for none).
func (c *call) init(t *Transport, req *http.Request, o *callOptions) {
	c.t, c.policy, c.req, c.out, c.ctx = t, t.retry.Load(), req, req, req.Context()
	if o != nil {
		if o.retry != nil {
			c.policy, c.ownPolicy = o.retry, true
		}
		c.stats, c.shared, c.priority = o.stats, o.budget, o.priority
		c.trace, c.endpoint = o.trace, o.endpoint
	}
	if c.shared == nil {
		c.own = c.policy.TotalWaitCap
	}
}

// initAcquire makes c the call of Acquire: a call with no request, whose
// waits are traced under key, with maxWait its whole budget, so that every
// wait it may start is one that fits, and a limit refuses the others as a
// request's MaxWait does.
func (c *call) initAcquire(t *Transport, ctx context.Context, key string, maxWait time.Duration, o *callOptions) {
	c.t, c.acquireKey, c.ctx, c.own = t, key, ctx, max(maxWait, 0)
	if o != nil {
		c.priority, c.stats, c.trace, c.endpoint = o.priority, o.stats, o.trace, o.endpoint
	}
}

// endInvalid ends a call that could not start, with err, counted and
// traced.
func (c *call) endInvalid(err error) {
	c.gaveUp = GiveUpInvalid
	c.end(nil, err)
}

// host is the request's host, the key of its traces; "" without a URL.
// A call of Acquire, which has no request, is traced under its key.
func (c *call) host() string {
	switch {
	case c.req == nil:
		return c.acquireKey
	case c.req.URL == nil:
		return ""
	}
	return c.req.URL.Host
}

// run is the attempt loop of the pipeline: prepare the body, then for each
// attempt admit, send, classify, feed back and decide, until a response is
// final or nothing is left to try with. Both kinds of failed attempt, a
// response to retry and a network error, meet in one decision (planRetry),
// so that what must hold before a wait starts is checked in one place.
func (c *call) run() (*http.Response, error) {
	if err := c.prepareBody(); err != nil {
		c.gaveUp = GiveUpBody
		return nil, err
	}
	c.depositRetryShare()
	return c.attemptLoop(nil)
}

// runSent is run of a call whose first attempt Transport.sendAtOnce
// sent, as admit would have let it go, the transport's sent-th, and
// answered with first, which policy p classified; learns says an
// adaptive scope applies to it. The loop goes on from the reading of that
// answer, under p.
func (c *call) runSent(first *reply, sent int64, p *RetryPolicy, learns bool) (*http.Response, error) {
	c.policy, c.own = p, p.TotalWaitCap
	c.replayable, c.learns, c.attempts, c.sent = true, learns, 1, sent
	return c.attemptLoop(first)
}

// attemptLoop runs attempts until one's response is final or the call
// gives up; first, when not nil, is the first attempt's answer, already
// sent and classified.
func (c *call) attemptLoop(first *reply) (*http.Response, error) {
	defer c.returnUnsentRetry()
	for {
		var rep reply
		if first == nil {
			if !c.ownPolicy {
				c.policy = c.t.retry.Load()
			}
			if err := c.admit(); err != nil {
				closeRequestBody(c.out)
				c.giveUp(err)
				return c.lastOr(err)
			}
			rep.resp, rep.err = c.send()
			rep.class = c.classify(rep.resp, rep.err)
		} else {
			rep, first = *first, nil
		}
		resp, err, class := rep.resp, rep.err, rep.class
		c.read(&rep)
		if c.tracesResponses() {
			c.traceResponse(&rep)
		}
		c.feedBack(&rep)

		var delay time.Duration
		paced := false // the retry waits as the server, or the key's cap, says
		if err != nil {
			if final := c.refuseNetworkRetry(err); final != nil {
				c.giveUp(final)
				return c.lastOr(final)
			}
			delay = c.policy.jittered(c.attempts - 1)
		} else {
			if c.final(class) {
				markClass(resp, class)
				return c.deliver(resp), nil
			}
			delay = c.responseDelay(&rep)
			paced = class.refusal() && (c.capped || rep.hint > 0 && !c.policy.IgnoreRetryAfter)
		}

		next, refused := c.planRetry(delay, paced)
		if refused != nil {
			c.giveUp(refused)
			if resp != nil && c.ctx.Err() != nil {
				drainAndClose(resp.Body) // a cancelled call ends with its error
				c.held.release()
				return nil, c.ctx.Err()
			}
			if resp != nil {
				markClass(resp, class)
				return c.deliver(resp), nil // the last response is the answer
			}
			return c.lastOr(fmt.Errorf("ratewise: giving up after %d attempts, %w: %w", c.attempts, refused, err))
		}
		c.t.counters.recordRetry(resp)
		c.traceRetry(delay, resp)
		if resp != nil {
			c.keepLast(resp, class)
		}
		if err := c.wait(delay, WaitBackoff); err != nil {
			closeRequestBody(next)
			c.giveUp(err)
			return nil, err
		}
		c.out = next
	}
}

// classify reads the attempt's outcome: the retry policy's class of its
// response, Final after a network error. It counts it.
func (c *call) classify(resp *http.Response, err error) Class {
	class := Final
	if err == nil {
		class = c.policy.classify(resp, c.req)
		c.stats.recordResponse(resp.StatusCode, class)
		if class.refusal() {
			c.t.counters.recordRateLimited(c.req.URL.Host)
		}
	}
	return class
}

// reply is an attempt's outcome, read once for every layer that uses
// it (the breaker, the pause gate and the learned pace, the retry's
// delay, the trace): the response or the error, its class, and the wait
// hint it carries, at one reading of the clock.
type reply struct {
	resp  *http.Response
	err   error
	class Class
	// hint is the server's wait hint, as it said it (no policy applied);
	// hinted is set when it gave one that could be read.
	hint   time.Duration
	hinted bool
	// quota is set when the answer was drawn already to be read for a
	// count of the server's quota (sampleQuota), before the call was
	// made: it is not drawn again.
	quota bool
	// at is when the reply was read; zero when nothing needed the time:
	// on a virtual machine a reading of the clock can cost as much as the
	// rest of a request that needs no help.
	at time.Time
}

// read reads the wait hint of the attempt's reply, whose response, error
// and class rep holds. The hint is read, and the clock, only when a layer
// may use them: a response that is not Final, a 429 a breaker takes for a
// rate-limit event, or one a trace hook listens for. The reply is filled
// in place, and handed on by pointer: it is larger than a cache line.
func (c *call) read(rep *reply) {
	resp, class := rep.resp, rep.class
	if rep.err == nil && (class != Final || resp.StatusCode == http.StatusTooManyRequests && c.t.breakers != nil || c.tracesResponses()) {
		rep.at = time.Now()
		if class == Retryable && c.paced() {
			// A transient error's wait is what the server says of it; a
			// spent quota's reset beside it is the pace's to keep, as it
			// keeps it for a success. With no pace, the reset is all
			// that holds the retry off a spent quota.
			rep.hint, rep.hinted = headers.RetryAfterHint(resp, rep.at)
		} else {
			rep.hint, rep.hinted = headers.WaitHint(resp, rep.at)
		}
	}
}

// final reports whether a response of class ends the call: one the policy
// does not retry (Final, Blocked), or a retry that cannot be, the
// attempts spent or the body not to be had again. It notes why the call
// gives up, when it does.
func (c *call) final(class Class) bool {
	switch {
	case class == Final:
	case class == Blocked:
		c.gaveUp = GiveUpBlocked
	case c.attempts >= c.policy.MaxAttempts:
		c.gaveUp = GiveUpAttempts
	case !c.replayable:
		c.gaveUp = GiveUpBody
	default:
		return false
	}
	return true
}

// giveUp notes why the call gives up: err, read as a GiveUpReason.
func (c *call) giveUp(err error) {
	var open *CircuitOpenError
	var limited *ClientLimitError
	var pastDeadline pastDeadlineError
	switch {
	case c.ctx.Err() != nil:
		c.gaveUp = GiveUpCanceled
	case errors.As(err, &open):
		c.gaveUp = GiveUpBreakerOpen
	case errors.As(err, &limited):
		c.gaveUp = GiveUpLimit
	case errors.Is(err, ErrRetryBudgetExhausted):
		c.gaveUp = GiveUpRetryBudget
	case errors.Is(err, ErrBudgetExhausted), errors.As(err, &pastDeadline):
		c.gaveUp = GiveUpWaitBudget
	case errors.Is(err, errBodyAgain):
		c.gaveUp = GiveUpBody
	default:
		c.gaveUp = GiveUpNetwork
	}
}

// end counts and reports the call's end.
func (c *call) end(resp *http.Response, err error) {
	if err != nil {
		if c.gaveUp == "" {
			c.giveUp(err)
		}
		c.t.counters.recordError(err, c.req)
	}
	c.t.counters.recordEnd(c.gaveUp)
	if c.traced() {
		c.traceEnd(resp, err)
	}
}

// send makes one attempt through the base RoundTripper.
func (c *call) send() (*http.Response, error) {
	c.retryTaken = false // spent
	c.attempts++
	c.sent = c.t.counters.attempts.Add(1)
	if c.traced() {
		c.traceAttempt()
	}
	c.stats.recordAttempt()
	c.ticket.Sent()
	return c.t.sendBase(c.out)
}

// sendBase sends req through the base RoundTripper, holding it to the
// contract: a response or an error, never both nor neither.
func (t *Transport) sendBase(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp == nil {
		err = errNoResponse
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close() // a broken base returned both; keep the contract
		}
		return nil, err
	}
	return resp, nil
}

var errNoResponse = errors.New("ratewise: base RoundTripper returned neither a response nor an error")

// deliver hands resp to the caller, its body freeing the slots it holds.
func (c *call) deliver(resp *http.Response) *http.Response {
	c.last = nil
	return c.held.deliver(resp)
}

// heldSlots are the concurrency slots an attempt holds, one per scope
// with a MaxConcurrent.
type heldSlots struct{ holds[scopes.Slot] }

// release frees every slot held and forgets them.
func (h *heldSlots) release() { h.drain(scopes.Slot.Release) }

// deliver hands resp on, its body freeing the slots h holds, which h
// then forgets.
func (h *heldSlots) deliver(resp *http.Response) *http.Response {
	if h.n == 0 {
		return resp // inlined: most calls hold no slot
	}
	return h.deliverHeld(resp)
}

// deliverHeld is deliver of a response whose attempt holds slots: its
// body is wrapped once for each, so that the one slot most hold costs one
// allocation of a third the size of all held.
func (h *heldSlots) deliverHeld(resp *http.Response) *http.Response {
	if resp.Body == nil || resp.Body == http.NoBody {
		h.release()
		return resp
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, slot: h.inline[0]}
	for i := 1; i < h.n; i++ {
		resp.Body = &slotBody{ReadCloser: resp.Body, slot: h.at(i)}
	}
	*h = heldSlots{}
	return resp
}

// slotBody is a response body whose request holds a concurrency slot,
// freed when the body is closed or read to its end, the first time only:
// a Close racing a Read's end frees it once.
type slotBody struct {
	io.ReadCloser
	released atomic.Bool
	slot     scopes.Slot
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func (b *slotBody) release() {
	if b.released.CompareAndSwap(false, true) {
		b.slot.Release()
	}
}

// keepLast discards resp, of class, before a retry: its body is drained
// (bounded) and closed, freeing its connection and slots, and kept in
// memory when small, so that resp can still be handed back should the
// retry be refused.
func (c *call) keepLast(resp *http.Response, class Class) {
	c.last = nil
	if resp.Body != nil {
		kept, _ := io.ReadAll(io.LimitReader(resp.Body, peekLimit+1))
		drainAndClose(resp.Body)
		if len(kept) <= peekLimit {
			resp.Body = io.NopCloser(bytes.NewReader(kept))
			markClass(resp, class)
			c.last = resp
		}
	}
	c.held.release()
}

// lastOr returns the previous attempt's response when there is one, the
// answer the call obtained, and err otherwise. A cancelled context ends
// the call with err whatever it obtained.
func (c *call) lastOr(err error) (*http.Response, error) {
	resp := c.last
	c.last = nil
	if resp != nil && c.ctx.Err() == nil {
		return resp, nil
	}
	if resp != nil {
		_ = resp.Body.Close()
	}
	return nil, err
}

// traced reports whether any trace hears this call.
func (c *call) traced() bool { return c.t.trace != nil || c.trace != nil }

// tracesResponses reports whether a hook listens for classified
// responses.
func (c *call) tracesResponses() bool {
	return c.t.trace != nil && c.t.trace.ResponseClassified != nil || c.trace != nil && c.trace.ResponseClassified != nil
}

// honouredHint is rep's wait hint as the call honours it: 0 when there is
// none or the policy ignores hints, and no longer than the pause gate's
// longest pause.
func (c *call) honouredHint(rep *reply) time.Duration {
	if c.policy.IgnoreRetryAfter || !rep.hinted {
		return 0
	}
	return min(max(rep.hint, 0), c.t.maxPause())
}
