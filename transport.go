package ratewise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/keyed"
)

// Transport is an [http.RoundTripper] that sends each request through a
// base RoundTripper, in the order of the pipeline:
//
//   - the key's circuit breaker ([WithBreaker]): while open, nothing is
//     sent;
//   - the key's cooldown gate ([WithCooldown]), paused by servers' wait
//     hints, then each limit scope ([WithLimit]): a concurrency slot, then
//     its pace, told or learned from the server ([Limit.Adaptive]);
//   - the send, then the retry policy ([WithRetry]): rate-limited and
//     retryable responses, and network errors of idempotent requests, are
//     tried again after a backoff raised to the server's hint, while
//     attempts, the wait budget and the host's retry budget last.
//
// Create one with [New]. It is safe for concurrent use; its zero value is
// not usable.
type Transport struct {
	base  http.RoundTripper
	retry atomic.Pointer[RetryPolicy] // with defaults filled in; SetRetryPolicy replaces it
	// scopeList is the limit scopes, in the order given. AddLimit
	// replaces the slice, never changes it: a request reads it once
	// (scopes) and goes through what it read.
	scopeList atomic.Pointer[[]*scope]
	gate      *gate // nil when the cooldown gate is off
	// retryBudgets holds the retry balance of each host that retried.
	retryBudgets *keyed.Map[retryBalance]
	// trace hears every call (WithTrace, WithLogger); nil when nothing
	// does. counters are what Stats reports.
	trace *Trace
	// counters live apart from the fields every call reads, so that the
	// adds of one core do not evict those fields from the others' caches.
	counters *counters
	breakers *breakers // nil without WithBreaker
	// paced is set when a scope paces its keys (a Rate, or Adaptive): that
	// pace, not the gate, answers a hint of a second or less.
	paced atomic.Bool
	// learns is set when a scope is Adaptive: its keys learn from the
	// signals of requests it did not pace. noLearning is WithoutLearning.
	learns     atomic.Bool
	noLearning bool
	reloadMu   sync.Mutex // serializes SetLimit and AddLimit
	// err is the first invalid option; every RoundTrip returns it so that
	// a bad configuration is loud rather than silently replaced.
	err error
}

var _ http.RoundTripper = (*Transport)(nil)

// errNoURL rejects at once a request that no base could send, rather than
// retrying the base's error.
var errNoURL = errors.New("ratewise: request has no URL")

// Option configures a [Transport] in [New].
type Option func(*Transport)

// New returns a Transport that sends requests through base, or through
// [http.DefaultTransport] when base is nil. Without options it retries with
// [DefaultRetryPolicy], holds a host's requests while the host's wait hint
// lasts, and learns each host's limit: a host sends unpaced until its
// first rate-limit signal (a refusal, or a count of its quota in the
// headers), then at the pace it learned from the server (see
// [Limit.Adaptive]). That learning is the scope named [LearnedScope]; a
// Limit you give that paces (a Rate, a MinSpacing, a Window, or Adaptive
// with a key or ceiling of your own) replaces it, and [WithoutLearning]
// turns it off. There is no breaker unless [WithBreaker] adds one. An invalid
// option makes every RoundTrip return an error naming the bad fields;
// check policies with their Validate methods to catch that at start-up.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, gate: newGate(CooldownPolicy{}), counters: new(counters),
		retryBudgets: keyed.New(DefaultIdleTimeout, nil, forgettableBalance)}
	t.scopeList.Store(new([]*scope))
	defaults := DefaultRetryPolicy()
	t.retry.Store(&defaults)
	for _, opt := range opts {
		if opt != nil {
			opt(t)
		}
	}
	if !t.noLearning && !t.paced.Load() {
		WithLimit(Limit{Name: LearnedScope, Adaptive: true})(t)
	}
	if b := t.breakers; b != nil {
		cfg := *b.config()
		cfg.notify = breakerListeners(cfg.policy.OnStateChange, t.trace)
		b.cfg.Store(&cfg)
	}
	return t
}

// breakerListeners returns what tells onChange and trace of a breaker's
// change, or nil when neither listens.
func breakerListeners(onChange func(BreakerChange), trace *Trace) func(BreakerChange) {
	var hook func(BreakerChange)
	if trace != nil {
		hook = trace.BreakerStateChanged
	}
	return composeHook(onChange, hook)
}

// DefaultIdleTimeout is how long per-key state (a limiter's bucket, a
// cooldown, a breaker) is kept at least after its key was last used, when
// the policy does not say otherwise. It is evicted later, when requests
// for other keys come, and only when it has nothing left to remember.
const DefaultIdleTimeout = 10 * time.Minute

// idleTimeout is a policy's IdleTimeout d, or DefaultIdleTimeout when d
// is not positive.
func idleTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultIdleTimeout
	}
	return d
}

// LearnedScope is the Name of the limit scope that [New] adds when no
// Limit given paces requests: Limit{Name: LearnedScope, Adaptive: true},
// keyed by Host. [Transport.LimitStatus] reports it, and
// [Transport.SetLimit] may give it a ceiling (a Rate).
const LearnedScope = "learned"

// WithoutLearning keeps [New] from adding the [LearnedScope]: requests
// are then paced by the Limits given and nothing else, and a server's
// refusals are answered by the retry policy and the cooldown gate alone.
func WithoutLearning() Option {
	return func(t *Transport) { t.noLearning = true }
}

// WithRetry sets the retry policy; zero fields take their defaults. A
// policy with MaxAttempts 1 turns retries off.
func WithRetry(p RetryPolicy) Option {
	return func(t *Transport) {
		prepared, err := p.prepared()
		if err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		t.retry.Store(prepared)
	}
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, when it has a CloseIdleConnections method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req through the pipeline and returns the final response
// with a nil error, whatever its status. It returns an error when there is
// no response to give: a network failure, an open breaker
// (*CircuitOpenError), a limit that refused to queue (*LimitError), or a
// wait budget spent before any response came. When a wait before a retry
// is refused, the previous response is returned instead, if its body was
// small enough (4 KiB) to keep. A cancelled context always ends the call
// with its error. RoundTrip does not modify req; retries send shallow
// copies carrying a fresh body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := call{t: t, policy: t.retry.Load(), req: req, out: req, ctx: req.Context()}
	o := optionsFrom(c.ctx)
	if o != nil {
		if o.retry != nil {
			c.policy, c.ownPolicy = o.retry, true
		}
		c.stats, c.shared, c.priority = o.stats, o.budget, o.priority
		c.trace, c.endpoint = o.trace, o.endpoint
	}
	// A call that cannot start still ends, counted and traced.
	var invalid error
	switch {
	case t.err != nil:
		invalid = t.err
	case req.URL == nil:
		invalid = errNoURL
	case o != nil && o.retryErr != nil:
		invalid = o.retryErr
	}
	if invalid != nil {
		closeRequestBody(req)
		c.gaveUp = GiveUpInvalid
		c.end(nil, invalid)
		return nil, invalid
	}
	if c.shared == nil {
		c.waitLeft = c.policy.TotalWaitCap
	}
	resp, err := c.run()
	c.end(resp, err)
	return resp, err
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

// call is the state of one RoundTrip. It lives on RoundTrip's stack, so a
// request that is not retried allocates nothing for it.
type call struct {
	t      *Transport
	policy *RetryPolicy
	// ownPolicy is set when the context gave the policy; otherwise each
	// attempt takes the transport's, which SetRetryPolicy may replace.
	ownPolicy bool
	req       *http.Request // the caller's request, never modified
	out       *http.Request // what the next attempt sends
	ctx       context.Context
	stats     *CallStats
	priority  Priority
	trace     *Trace
	endpoint  string
	// acquireKey is, for a call of Acquire, which sends no request, the
	// key its waits are traced under.
	acquireKey string

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
	// The wait budget: shared through the context, or else the policy's
	// TotalWaitCap, of which waitLeft remains. paidUntil and paidCharge
	// are the last wait reserved from a shared budget, for giving it back.
	shared     *budget
	waitLeft   time.Duration
	paidUntil  time.Time
	paidCharge time.Duration

	// What the current attempt holds: its breaker ticket, and concurrency
	// slots until its response body is closed.
	ticket   breakerTicket
	held     heldSlots
	adaptive adaptiveTickets
	// gateKeyed is set once gateKeyV holds the request's cooldown key.
	gateKeyed bool
	gateKeyV  string
	// last is the previous attempt's response, its body kept in memory,
	// handed back if a wait before the next attempt is refused.
	last *http.Response
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
	defer c.returnUnsentRetry()
	for {
		if !c.ownPolicy {
			c.policy = c.t.retry.Load()
		}
		if err := c.admit(); err != nil {
			closeRequestBody(c.out)
			c.giveUp(err)
			return c.lastOr(err)
		}
		resp, err := c.send()
		class := Final
		if err == nil {
			class = c.policy.classify(resp)
			c.stats.recordResponse(resp.StatusCode, class)
			if class.refusal() {
				c.t.counters.recordRateLimited(c.req.URL.Host)
			}
		}
		c.traceResponse(resp, err, class)
		c.feedBack(resp, err, class)

		var delay time.Duration
		if err != nil {
			if final := c.refuseNetworkRetry(err); final != nil {
				c.giveUp(final)
				return c.lastOr(final)
			}
			delay = c.policy.jittered(c.attempts - 1)
		} else {
			if class == Final || class == Blocked || c.attempts >= c.policy.MaxAttempts || !c.replayable {
				switch {
				case class == Final:
				case class == Blocked:
					c.gaveUp = GiveUpBlocked
				case c.attempts >= c.policy.MaxAttempts:
					c.gaveUp = GiveUpAttempts
				default:
					c.gaveUp = GiveUpBody
				}
				markClass(resp, class)
				return c.deliver(resp), nil
			}
			delay = c.responseDelay(resp)
		}

		next, refused := c.planRetry(delay)
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

// giveUp notes why the call gives up: err, read as a GiveUpReason.
func (c *call) giveUp(err error) {
	var open *CircuitOpenError
	var limited *LimitError
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
	c.traceEnd(resp, err)
}

// admit takes the attempt through the breaker, the cooldown gate and every
// limit scope, waiting where they say, within the budget. A layer reads
// the clock only when it has something to time: on this machine's kind a
// reading costs more than a whole layer's bookkeeping.
func (c *call) admit() error {
	for {
		if err := c.admitBreaker(); err != nil {
			return err
		}
		if err := c.admitLimits(); err != nil {
			return err
		}
		// The breaker may have opened while this attempt queued in the
		// gate or a scope: then it is not sent, and meets the breaker
		// again, as an attempt that came now would.
		if !c.ticket.openedSince() {
			return nil
		}
		c.withdraw()
		c.ticket.cancel(c)
	}
}

// admitBreaker takes the attempt through its key's breaker, waiting out
// an open one if the budget allows.
func (c *call) admitBreaker() error {
	t := c.t
	if t.breakers == nil {
		return nil
	}
	key := t.breakers.key(c.req)
	e := t.breakers.acquire(key)
	ticket, err := t.breakers.admit(c, key, e)
	if err != nil {
		t.breakers.states.Release(e)
		return err
	}
	c.ticket = ticket // holds e until the outcome
	return nil
}

// admitLimits takes the attempt through the cooldown gate and every limit
// scope, waiting again when a pause began while it queued.
func (c *call) admitLimits() error {
	t := c.t
	for {
		if g := t.gate; g != nil && !g.idle() {
			if err := g.admit(c, c.gateKey()); err != nil {
				c.ticket.cancel(c)
				return err
			}
		}
		if err := c.admitScopes(); err != nil {
			c.ticket.cancel(c)
			return err
		}
		// A refusal seen while this attempt queued in a scope pauses it
		// too: give the slots back and wait the pause out.
		if t.gate == nil || t.gate.idle() || !t.gate.paused(c.gateKey()) {
			return nil
		}
		c.withdraw()
	}
}

// withdraw gives back what the scopes granted an attempt that will not be
// sent now: its concurrency slots and its adaptive turns.
func (c *call) withdraw() {
	c.held.release()
	c.adaptive.drain(adaptiveTicket.cancel)
}

// admitScopes takes the attempt through every limit scope in turn.
func (c *call) admitScopes() error {
	for _, s := range c.t.scopes() {
		if s.applies != nil && !s.applies(c.req) {
			continue // not a request this scope limits
		}
		key := s.key(c.req)
		if s.lazy() && s.answered(key) {
			continue // an adaptive scope's key that has learned nothing: unpaced
		}
		e := s.states.Acquire(key, true)
		seq, slotted, scout, err := s.admit(c, key, &e.State)
		if err != nil {
			s.states.Release(e)
			c.withdraw()
			return err
		}
		if seq != 0 || scout {
			s.states.Hold(e) // one hold for the ticket, until the answer
			t := adaptiveTicket{scope: s, entry: e, a: e.State.adapt.Load(), seq: seq}
			if scout {
				t.a, t.scoutKey = nil, key
			}
			c.adaptive.add(t)
		}
		if slotted {
			c.held.add(heldSlot{scope: s, entry: e})
		} else {
			s.states.Release(e)
		}
	}
	return nil
}

// send makes one attempt through the base RoundTripper.
func (c *call) send() (*http.Response, error) {
	c.retryTaken = false // spent
	c.attempts++
	c.sent = c.t.counters.attempts.Add(1)
	c.traceAttempt()
	c.stats.recordAttempt()
	c.ticket.sent()
	resp, err := c.t.base.RoundTrip(c.out)
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

// feedBack tells the layers how the attempt went: the breaker its outcome,
// the cooldown gate the server's wait hint. A failed attempt frees its
// concurrency slots at once; a response keeps them until its body closes.
func (c *call) feedBack(resp *http.Response, err error, class Class) {
	probed := c.ticket.probe != nil
	c.ticket.outcome(c, resp, err, class)
	c.ticket = breakerTicket{}
	// hint is the server's wait hint on a refusal it is honoured for. The
	// clock is read only when something needs the time: on this machine's
	// kind a reading costs as much as the rest of a request that needs no
	// help.
	var hint time.Duration
	var now time.Time
	if err == nil && class != Final && !c.policy.IgnoreRetryAfter {
		now = time.Now()
		if h, ok := headers.WaitHint(resp, now); ok && h > 0 {
			// No hint holds a key longer than the gate's longest pause.
			hint = min(h, c.t.maxPause())
		}
	}
	if c.t.learns.Load() && err == nil && (class.refusal() || c.sampleQuota(resp)) {
		c.learnUntracked(resp, class, hint)
	}
	// A hint pauses the key's other requests too: all of them when
	// nothing paces the key, else only a hint of more than a second, and
	// not once the key's learned pace has seen its server's hints
	// overstate when its quota comes back.
	pausesKey := hint > 0 && c.t.gate != nil && (hint > time.Second || !c.t.paced.Load())
	pauseUntil := now.Add(hint)
	closed := probed && err == nil && class == Final
	if c.adaptive.n > 0 && now.IsZero() {
		now = time.Now()
	}
	c.adaptive.drain(func(t adaptiveTicket) {
		t.finish(resp, err, class, hint, now)
		if t.a != nil {
			pausesKey = pausesKey && t.a.HintPausesKey()
			if closed {
				t.a.Pause(now) // the breaker closes: resume gently
			}
			// A window the key learned is held for every transport
			// sharing the gate's store, as a hint's pause is.
			if held := t.a.WindowHeldUntil(); c.t.gate != nil && c.t.gate.Store != nil && held.After(now) {
				pausesKey, pauseUntil = true, maxTime(pauseUntil, held)
			}
		}
	})
	if pausesKey {
		c.t.gate.pause(c.ctx, c.gateKey(), pauseUntil)
	}
	if err != nil {
		c.held.release()
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// maxPause is the longest one hint holds a key: the cooldown gate's
// MaxPause, or its default without a gate.
func (t *Transport) maxPause() time.Duration {
	if t.gate != nil {
		return t.gate.MaxPause
	}
	return DefaultCooldownMaxPause
}

// deliver hands resp to the caller, its body freeing the slots it holds.
func (c *call) deliver(resp *http.Response) *http.Response {
	c.last = nil
	if c.held.n == 0 {
		return resp
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		c.held.release()
		return resp
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, slots: c.held}
	c.held = heldSlots{}
	return resp
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

// gateKey is the request's key in the cooldown gate, computed once a call.
func (c *call) gateKey() string {
	if !c.gateKeyed {
		c.gateKeyV, c.gateKeyed = c.t.gate.Key(c.req), true
	}
	return c.gateKeyV
}
