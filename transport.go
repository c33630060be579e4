package ratewise

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/scopes"
	"github.com/ratewise/ratewise/store"
)

// Transport is an [http.RoundTripper] that sends each request through a
// base RoundTripper, by the pipeline (see the package doc): the key's
// breaker, its pause gate and each limit scope, the send, then the retry
// policy, while attempts, the wait budget and the host's retry budget last.
// Create one with [New] or [NewTransport]. It is safe for concurrent use; its zero value is
// not usable.
type Transport struct {
	base  http.RoundTripper
	retry atomic.Pointer[RetryPolicy] // with defaults filled in; SetRetryPolicy replaces it
	// scopeList is the limit scopes, in the order given. AddLimit
	// replaces the slice, never changes it: a request reads it once
	// (scopes) and goes through what it read.
	scopeList atomic.Pointer[[]*scope]
	gate      *gate // nil when the pause gate is off
	// retryBudgets holds the retry balance of each host that retried.
	retryBudgets *keyed.Map[retryBalance]
	// trace hears every call (WithTrace, WithLogger); nil when nothing
	// does. counters are what Stats reports.
	trace *Trace
	// hintLog logs the wait hints that could not be read (WithLogger);
	// nil without a logger.
	hintLog *hintLog
	// counters live apart from the fields every call reads, so that the
	// adds of one core do not evict those fields from the others' caches.
	counters *counters
	breakers *breakers // nil without WithBreaker
	// store is WithStore's, given to what has no store of its own;
	// admitStore is it when it answers an attempt's questions together,
	// and breakerInStore and gateInStore say whether the breakers and the
	// gate keep their state in it.
	store                       store.Store
	admitStore                  store.Admitter
	breakerInStore, gateInStore bool
	// shared is what the limit scopes share: the store when it keeps
	// what adaptive scopes learn (store.Learned), their keys then
	// learning as one with every transport sharing it, and admitStore
	// asking it with the rest; the store when it keeps told windows'
	// starts (store.Windows), a told Window then the fleet's; and the
	// count of told limits changed (see internal/scopes).
	shared *scopes.Shared
	// noLearning is WithoutLearning. learned is the LearnedScope New
	// added, kept last of the scopes and admitted first (see
	// admitScopes); nil when it added none. Whether a request learns, or
	// is paced as told, the scopes that apply to it say (admitScopes).
	noLearning bool
	learned    *scope
	// plain is set by New when the transport has no store nor trace, and
	// every option was valid: the first attempt of its calls may be let go
	// at once (see holdsNothingBack), which the rest asks of each request.
	plain    bool
	reloadMu sync.Mutex // serializes SetLimit and AddLimit
	// err is the first invalid option; every RoundTrip returns it so that
	// a bad configuration is loud rather than silently replaced.
	err error
}

var _ http.RoundTripper = (*Transport)(nil)

// errNoURL rejects at once a request that no base could send, rather than
// retrying the base's error.
var errNoURL = errors.New("ratewise: request has no URL")

// Option configures a [Transport] in [New] or [NewTransport].
type Option func(*Transport)

// New returns a Transport that sends requests through base, or through
// [http.DefaultTransport] when base is nil. Without options it retries with
// [DefaultRetryPolicy], pauses a host while its wait hint lasts, and learns
// each host's limit from its first rate-limit signal on ([LearnedScope]);
// a Limit you give is a ceiling the learning stays under (see "Limits" in
// the package doc). There is no breaker unless [WithBreaker] adds one.
//
// New never fails: an invalid option makes every RoundTrip return an
// error naming the bad fields. [NewTransport] returns that error where
// the transport is built.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, gate: newGate(PausePolicy{}), counters: new(counters), shared: new(scopes.Shared),
		retryBudgets: keyed.New(DefaultIdleTimeout, nil, forgettableBalance)}
	t.scopeList.Store(new([]*scope))
	defaults := DefaultRetryPolicy()
	t.retry.Store(&defaults)
	for _, opt := range opts {
		if opt != nil {
			opt(t)
		}
	}
	t.shareThroughStore()
	if !t.noLearning && !t.learnsEveryRequest() {
		t.learned = newScope(Limit{Name: LearnedScope, Adaptive: true}, t.shared)
		t.addScope(t.learned)
	}
	if b := t.breakers; b != nil {
		if notify := breakerListeners(b.config().OnStateChange, t.trace); notify != nil {
			b.SetNotify(engineNotify(notify))
		}
	}
	t.plain = t.store == nil && t.admitStore == nil && t.trace == nil && t.err == nil
	return t
}

// NewTransport is [New] that reports a misconfiguration where the
// transport is built, as [http.NewRequest] does: when an option is
// invalid, it returns a nil Transport and the error every RoundTrip of
// New's transport would return, which names each bad option and field,
// all of them joined in one error. Otherwise it returns the transport New
// returns and a nil error.
func NewTransport(base http.RoundTripper, opts ...Option) (*Transport, error) {
	t := New(base, opts...)
	if t.err != nil {
		return nil, t.err
	}
	return t, nil
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

// LearnedScope is the Name of the limit scope that [New] adds, after the
// Limits given, unless [WithoutLearning] or an Adaptive Limit given
// learns of every request: Limit{Name: LearnedScope, Adaptive: true},
// keyed by Host. [Transport.KeyStatus] reports it, and
// [Transport.SetLimit] may give it a ceiling (a Rate).
const LearnedScope = "learned"

// WithoutLearning keeps [New] from adding the [LearnedScope]: requests
// are then paced by the Limits given and nothing else, and a server's
// refusals are answered by the retry policy and the pause gate alone.
func WithoutLearning() Option {
	return func(t *Transport) { t.noLearning = true }
}

// learnsEveryRequest reports whether an Adaptive scope given learns of
// every request: then New adds no LearnedScope.
func (t *Transport) learnsEveryRequest() bool {
	for _, s := range t.scopes() {
		if s.Adaptive() && s.applies == nil {
			return true
		}
	}
	return false
}

// WithRetry sets the retry policy; zero fields take their defaults. A
// policy with MaxAttempts 1 turns retries off. An invalid policy makes
// every RoundTrip fail with its validation error, which [NewTransport]
// returns.
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
// with a nil error, whatever its status. It returns an error only when there
// is no response to give: a network failure, an open breaker
// (*CircuitOpenError), a limit that refused to queue (*ClientLimitError), or a
// wait budget spent before any response came; a refused wait returns the
// previous response when its body was small enough (4 KiB) to keep. A
// cancelled context ends the call with its error. req is not modified.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	o := optionsFrom(req.Context())
	if t.plain && o == nil {
		if learns, capped, ok := t.holdsNothingBack(req); ok {
			if capped || t.breakers != nil {
				return t.sendGranted(req, learns)
			}
			return t.sendAtOnce(req, learns, nil)
		}
	}
	return t.roundTrip(req, o)
}

// roundTrip is RoundTrip the whole way: the call of req, with the options
// o its context carries (nil for none).
func (t *Transport) roundTrip(req *http.Request, o *callOptions) (*http.Response, error) {
	var c call
	c.init(t, req, o)
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
		c.endInvalid(invalid)
		return nil, invalid
	}
	resp, err := c.run()
	c.end(resp, err)
	return resp, err
}

// holdsNothingBack reports whether no layer of t holds back the first
// attempt of req, a call with no options in its context through a plain
// transport (no store, trace nor invalid option): no key the pause gate
// holds, no scope that paces it (a told pace, or one its key learned), and
// a body that can be sent again (or none), so that nothing needs
// buffering. It reports too whether an adaptive scope learns from the
// answer, and whether a scope caps the request's concurrency. Most calls
// of a transport that is not throttled are such: sendAtOnce spares them
// the call's bookkeeping.
func (t *Transport) holdsNothingBack(req *http.Request) (learns, capped, ok bool) {
	if req.URL == nil || req.Body != nil && req.Body != http.NoBody && req.GetBody == nil ||
		t.gate != nil && !t.gate.Idle() {
		return false, false, false
	}
	all := t.scopes()
	if len(all) == 1 && all[0] == t.learned {
		// New(base)'s one scope, which limits every request: the loop
		// below costs it a tenth of its overhead (callgrind).
		return true, false, t.learned.Unpaced(t.learned.key(req))
	}
	for _, s := range all {
		switch {
		case !s.appliesTo(req):
		case s.Adaptive():
			if !s.Unpaced(s.key(req)) {
				return false, false, false
			}
			learns = true
		default:
			cfg := s.Config()
			if cfg.Paces() {
				return false, false, false
			}
			capped = capped || cfg.MaxConcurrent > 0
		}
	}
	return learns, capped, true
}

// granted is what the breaker and the concurrency caps gave the first
// attempt of a call that no layer holds back: its breaker's ticket and
// its slots.
type granted struct {
	ticket breaker.Ticket
	held   heldSlots
}

// sendGranted is sendAtOnce of req, which holdsNothingBack let through,
// when its breaker's ticket and a free slot of each scope that caps it
// are there at once; otherwise the call goes the whole way, and waits.
// It is a function of its own so that g, a breaker ticket large enough
// for its zeroing to show, is made only for a transport that needs one.
func (t *Transport) sendGranted(req *http.Request, learns bool) (*http.Response, error) {
	var g granted
	if !g.take(t, req) {
		return t.roundTrip(req, nil)
	}
	return t.sendAtOnce(req, learns, &g)
}

// take takes for req a free slot of each scope of t that caps it, then
// its breaker's ticket when the breaker is clean, and reports whether it
// has them all; it holds nothing when it has not.
func (g *granted) take(t *Transport, req *http.Request) bool {
	for _, s := range t.scopes() {
		if s.Adaptive() || s.Config().MaxConcurrent == 0 || !s.appliesTo(req) {
			continue
		}
		slot, ok := s.TrySlot(s.key(req))
		if !ok {
			g.held.release()
			return false
		}
		g.held.add(slot)
	}
	if b := t.breakers; b != nil && !b.TryClean(&g.ticket, b.key(req)) {
		g.held.release()
		return false
	}
	return true
}

// sendAtOnce makes the call of req, which holdsNothingBack let through
// (learns said there), by sending its first attempt straight to the base
// with what g holds for it (nil for nothing). An answer no layer would act
// on either (Final, a success to its breaker, no trial of the fleet's pace
// to answer, not drawn to be read for a count of the server's quota) ends
// the call, counted as call.end counts it; any other is read as the first
// attempt of a call, from there on as every call's.
func (t *Transport) sendAtOnce(req *http.Request, learns bool, g *granted) (*http.Response, error) {
	p := t.retry.Load()
	t.depositRetryShare(req, p)
	sent := t.counters.attempts.Add(1)
	if g != nil {
		g.ticket.Sent()
	}
	resp, err := t.sendBase(req)
	first := reply{resp: resp, err: err, class: Final}
	if err == nil {
		first.class = p.classify(resp, req)
		if first.class == Final && (!learns || !t.shared.Trials()) {
			first.quota = learns && sampleQuota(resp, sent)
			switch {
			case first.quota:
			case g == nil:
				t.counters.recordEnd("")
				return resp, nil
			case !g.ticket.Admitted() || t.breakers.tellSuccess(&g.ticket, req.Context(), resp):
				t.counters.recordEnd("")
				return g.held.deliver(resp), nil
			}
		}
		if first.class.refusal() {
			t.counters.recordRateLimited(req.URL.Host)
		}
	}
	var c call
	c.init(t, req, nil)
	if g != nil {
		c.ticket, c.held = g.ticket, g.held
	}
	resp, err = c.runSent(&first, sent, p, learns)
	c.end(resp, err)
	return resp, err
}

// maxPause is the longest one hint holds a key: the pause gate's
// MaxPause, or its default without a gate.
func (t *Transport) maxPause() time.Duration {
	if t.gate != nil {
		return t.gate.MaxPause
	}
	return DefaultMaxPause
}
