package admission

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// Handler is the inbound limiter: an [http.Handler] that admits each
// request through its scopes before it reaches the handler it wraps.
// Create it with New: the zero value is not usable. It is safe for
// concurrent use; its scopes' state lives as long as it does (give every
// route the same Handler, or the same Store, for one limit across them).
type Handler struct {
	next       http.Handler
	scopes     []*scope
	limiting   int    // scopes that limit something: the RateLimit-Policy items
	policy     string // RateLimit-Policy when every limiting scope applies
	ip         ipResolver
	headers    Headers
	exemptFunc func(*http.Request) bool
	exempts    []string
	logger     *slog.Logger
	hooks      Hooks
	respond    func(http.ResponseWriter, *http.Request, Refusal) // WithRefusalResponse's; nil writes the problem document
	epoch      time.Time

	// Requests are counted as they end, each in one of these.
	exempt, admitted, refused atomic.Int64
}

var _ http.Handler = (*Handler)(nil)

// Option configures a Handler.
type Option func(*config)

type config struct {
	limits     []ratewise.Limit
	clientIP   ClientIP
	headers    Headers
	headersSet bool
	exempt     []func(*http.Request) bool
	paths      []string
	logger     *slog.Logger
	hooks      Hooks
	respond    func(http.ResponseWriter, *http.Request, Refusal)
}

// Limit is one scope of the inbound limiter: a token bucket (Rate and
// Burst) or a fixed window (Burst turns a Window), per key. It offers only
// what a server-side scope does; see WithLimit for each field.
type Limit struct {
	// Name names the scope in headers, problem documents, statuses,
	// stats and logs: printable ASCII, one per scope; "limit N" when
	// empty, N counting WithLimit from 1.
	Name string
	// Rate and Burst make a token bucket (rate.Inf, or neither: it limits
	// nothing); Burst and Window a fixed window of Burst turns, starting
	// at a key's first request. A Burst with neither a Rate nor a Window
	// is refused.
	Rate   rate.Limit
	Burst  int
	Window time.Duration
	// Key keys it: nil means the client's IP address (see WithClientIP).
	Key ratewise.KeyFunc
	// Applies picks the requests it limits (nil: all).
	Applies func(*http.Request) bool
	// MaxWait lets a request whose turn comes within it wait for the turn
	// rather than be refused; MaxQueue caps the requests of a key waiting
	// at once (DefaultMaxQueue when zero); FailFast refuses at once.
	MaxWait  time.Duration
	MaxQueue int
	FailFast bool
	// IdleTimeout is how long a key's state outlives its last request;
	// zero means ratewise.DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Store shares the scope's buckets with every Handler given it (a
	// Rate is needed; a Window takes no Store).
	Store store.Buckets
}

// client is l as the ratewise.Limit the scope is built from.
func (l Limit) client() ratewise.Limit {
	return ratewise.Limit{Name: l.Name, Rate: l.Rate, Burst: l.Burst, Window: l.Window, Key: l.Key,
		Applies: l.Applies, MaxWait: l.MaxWait, MaxQueue: l.MaxQueue, FailFast: l.FailFast,
		IdleTimeout: l.IdleTimeout, Store: l.Store}
}

// WithLimit adds a scope; give it once per scope. Requests go through the
// scopes in the order given. A nil Key is the client's IP, not the Host a
// client's nil Key means. With a Store, the keys are "admission:", the Name
// and ":" and the key (but for Global); a store failing closed answers 503
// (see "Scopes" in the package doc).
func WithLimit(l Limit) Option {
	return func(c *config) { c.limits = append(c.limits, l.client()) }
}

// WithClientIP says where the client's IP address is read, for the
// scopes keyed by it. Without it, only RemoteAddr is believed.
func WithClientIP(ip ClientIP) Option { return func(c *config) { c.clientIP = ip } }

// WithHeaders picks the rate-limit fields the Handler writes; without it,
// DefaultHeaders. WithHeaders(0) writes none (refusals keep their status
// and problem document).
func WithHeaders(h Headers) Option {
	return func(c *config) { c.headers, c.headersSet = h, true }
}

// WithExempt lets the requests exempt reports true for through unlimited,
// uncounted by every scope (health checks, metrics). It may be given
// several times: a request any of them exempts is exempt.
func WithExempt(exempt func(*http.Request) bool) Option {
	return func(c *config) { c.exempt = append(c.exempt, exempt) }
}

// WithExemptPaths exempts the requests to paths: a path ending in "/"
// exempts its subtree ("/health/" exempts "/health/live"), others exactly
// that path ("/health", "/metrics").
func WithExemptPaths(paths ...string) Option {
	return func(c *config) { c.paths = append(c.paths, paths...) }
}

// WithLogger logs what the Handler decides: for each scope, requests
// admitted (admission_admitted), queued (admission_queued) and refused
// (admission_refused) at Debug, a store's outage (admission_store_down)
// at Warn, once per outage, and its end (admission_store_up) at Info.
// Nothing is logged without it.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithHooks calls hooks as the Handler decides (see Hooks).
func WithHooks(hooks Hooks) Option { return func(c *config) { c.hooks = hooks } }

// Refusal is how the Handler refuses a request, as WithRefusalResponse's
// func gets it.
type Refusal struct {
	// Status is 429 when a scope has no turn for the request, or 503 when
	// a store that fails closed failed or the request ended while it
	// waited.
	Status int
	// RetryAfter is when to come back, in the whole seconds the
	// Retry-After field says; 0 when the Handler cannot say.
	RetryAfter time.Duration
	// Scopes are the Names of the scopes that refused it.
	Scopes []string
}

// WithRefusalResponse makes respond answer each refused request instead
// of the problem document (RFC 9457) the Handler writes by default: the
// RateLimit fields and Retry-After are in w's header already, and
// respond writes the status (refusal.Status, or another of its choice)
// and the body.
func WithRefusalResponse(respond func(w http.ResponseWriter, r *http.Request, refusal Refusal)) Option {
	return func(c *config) { c.respond = respond }
}

// New returns next limited by the scopes the options give. It reports
// every option that is out of range at once, in one error.
func New(next http.Handler, opts ...Option) (*Handler, error) {
	c := config{headers: DefaultHeaders}
	for _, o := range opts {
		o(&c)
	}
	var errs []error
	if next == nil {
		errs = append(errs, errors.New("ratewise: admission: New needs the handler to limit; it got nil"))
	}
	h := &Handler{next: next, headers: c.headers, logger: c.logger, hooks: c.hooks, respond: c.respond, epoch: time.Now()}
	ip, err := newIPResolver(c.clientIP)
	errs = append(errs, err)
	h.ip = ip
	names := map[string]bool{}
	var items []string
	for i, l := range c.limits {
		s, err := newScope(l, i+1)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if names[s.name] {
			errs = append(errs, errors.New("ratewise: admission: two scopes are named "+s.jsonName+": name each its own, as the RateLimit headers tell them apart by name"))
		}
		names[s.name] = true
		h.scopes = append(h.scopes, s)
		if s.kind != kindNone {
			items = append(items, s.policyItem)
		}
	}
	for _, p := range c.paths {
		if !strings.HasPrefix(p, "/") {
			errs = append(errs, errors.New("ratewise: admission: WithExemptPaths: "+p+" is not a path: start it with /"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h.limiting = len(items)
	h.policy = strings.Join(items, ", ")
	h.exempts = c.paths
	if len(c.exempt) > 0 {
		fns := c.exempt
		h.exemptFunc = func(r *http.Request) bool {
			for _, f := range fns {
				if f(r) {
					return true
				}
			}
			return false
		}
	}
	return h, nil
}

// now is the Handler's clock: nanoseconds since it was made, on the
// monotonic clock.
func (h *Handler) now() int64 { return int64(time.Since(h.epoch)) }

// ClientIP returns the client's IP address for r, as the scopes keyed by
// it read it (see ClientIP).
func (h *Handler) ClientIP(r *http.Request) string { return h.ip.clientIP(r) }

// isExempt reports whether r goes through unlimited.
func (h *Handler) isExempt(r *http.Request) bool {
	for _, p := range h.exempts {
		if r.URL.Path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(r.URL.Path, p) {
			return true
		}
	}
	return h.exemptFunc != nil && h.exemptFunc(r)
}

// maxHeld is how many scopes a request's turns are kept for on its own
// stack; more take an allocation.
const maxHeld = 8

// ServeHTTP admits r through every scope that applies to it, in order,
// and serves it with the wrapped handler, or answers it: 429 when a
// scope refused it, 503 when a scope's store failed closed or r's
// context ended while it waited. A scope that refuses takes nothing
// from those before it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.serve(w, r, h.next) }

// Middleware returns h as a router's middleware, of the shape chi's
// r.Use and most routers take: each handler it wraps is limited by h's
// scopes, whose turns it shares with h and with the others it wraps.
func (h *Handler) Middleware() func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, next) })
	}
}

// NewMiddleware returns the limiter the options give (see New) as a
// router's middleware, and its Handler, for its Stats and Status.
func NewMiddleware(opts ...Option) (func(http.Handler) http.Handler, *Handler, error) {
	h, err := New(http.NotFoundHandler(), opts...) // the handler is the one each use wraps
	if err != nil {
		return nil, nil, err
	}
	return h.Middleware(), h, nil
}

// serve admits, queues or refuses r, and hands what it admits to next.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if h.isExempt(r) {
		h.exempt.Add(1)
		next.ServeHTTP(w, r)
		return
	}
	ctx := r.Context()
	now := h.now()
	deadline := int64(-1)
	if d, ok := ctx.Deadline(); ok {
		deadline = max(now+int64(time.Until(d)), 0)
	}
	var (
		held  [maxHeld]turn
		turns = held[:0]
		ip    string
		ipSet bool
		wait  int64
	)
	for _, s := range h.scopes {
		if s.kind == kindNone || s.applies != nil && !s.applies(r) {
			continue
		}
		var key string
		switch {
		case s.global:
		case s.key == nil:
			if !ipSet {
				ip, ipSet = h.ip.clientIP(r), true
			}
			key = ip
		default:
			key = s.key(r)
		}
		t, no := s.take(ctx, h, key, now, deadline)
		if no.reason != reasonNone {
			h.refuse(w, r, turns, &no, now)
			return
		}
		turns = append(turns, t)
		wait = max(wait, t.wait)
	}
	if wait > 0 && !h.queue(w, r, turns, wait) {
		return
	}
	if wait > 0 {
		now = h.now()
	}
	h.admitted.Add(1)
	if h.headers&HeaderRefusalsOnly == 0 {
		h.writeQuota(w.Header(), turns, now)
	}
	for i := range turns {
		t := &turns[i]
		t.s.dequeue(t)
		t.s.stats.admitted.Add(1)
		if h.hooks.Admitted != nil || h.logger != nil {
			h.event(r, eventAdmitted, t.s, t.key, time.Duration(t.wait), reasonNone)
		}
		t.s.done(t.e)
	}
	next.ServeHTTP(w, r)
}

// queue waits for the turns to come, as long as the longest of their
// waits. When r's context ends meanwhile, it gives every turn back,
// answers 503 and reports false.
func (h *Handler) queue(w http.ResponseWriter, r *http.Request, turns []turn, wait int64) bool {
	for i := range turns {
		t := &turns[i]
		if t.wait > 0 {
			t.s.stats.queued.Add(1)
			if h.hooks.Queued != nil || h.logger != nil {
				h.event(r, eventQueued, t.s, t.key, time.Duration(t.wait), reasonNone)
			}
		}
	}
	timer := time.NewTimer(time.Duration(wait))
	defer timer.Stop()
	select {
	case <-timer.C:
		for i := range turns {
			if t := &turns[i]; t.wait > 0 {
				t.s.stats.observeWait(time.Duration(t.wait))
			}
		}
		return true
	case <-r.Context().Done():
	}
	h.refused.Add(1)
	for i := range turns {
		t := &turns[i]
		t.s.giveBack(r.Context(), t)
		if t.wait > 0 {
			t.s.stats.refused[reasonCanceled].Add(1)
			if h.hooks.Refused != nil || h.logger != nil {
				h.event(r, eventRefused, t.s, t.key, time.Duration(t.wait), reasonCanceled)
			}
		}
		t.s.done(t.e)
	}
	h.writeProblem(w, r, http.StatusServiceUnavailable, problemCanceled, nil, 0)
	return false
}

// refuse answers r, which the scope of no refused after turns were taken:
// they are given back first.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, turns []turn, no *refusal, now int64) {
	h.refused.Add(1)
	for i := range turns {
		t := &turns[i]
		t.s.giveBack(r.Context(), t)
	}
	no.s.stats.refused[no.reason].Add(1)
	if h.hooks.Refused != nil || h.logger != nil {
		h.event(r, eventRefused, no.s, no.key, time.Duration(no.wait), no.reason)
	}
	switch no.reason {
	case reasonStoreUnavailable:
		h.releaseAll(turns)
		h.writeProblem(w, r, http.StatusServiceUnavailable, problemStoreDown, []*scope{no.s}, int64(time.Second))
		return
	case reasonCanceled:
		h.releaseAll(turns)
		h.writeProblem(w, r, http.StatusServiceUnavailable, problemCanceled, nil, 0)
		return
	}
	h.refuseLimited(w, r, turns, no, now)
	h.releaseAll(turns)
}

// releaseAll lets the entries of turns go.
func (h *Handler) releaseAll(turns []turn) {
	for i := range turns {
		turns[i].s.done(turns[i].e)
	}
}

// eventKind is which hook an event goes to.
type eventKind uint8

const (
	eventAdmitted eventKind = iota
	eventQueued
	eventRefused
)

var eventNames = [...]string{"admission_admitted", "admission_queued", "admission_refused"}

// event tells the hooks and the logger of a scope's decision.
func (h *Handler) event(r *http.Request, k eventKind, s *scope, key string, wait time.Duration, why reason) {
	ev := Event{Scope: s.name, Key: key, Wait: wait, Reason: why.String(), Request: r}
	switch k {
	case eventAdmitted:
		if h.hooks.Admitted != nil {
			h.hooks.Admitted(ev)
		}
	case eventQueued:
		if h.hooks.Queued != nil {
			h.hooks.Queued(ev)
		}
	case eventRefused:
		if h.hooks.Refused != nil {
			h.hooks.Refused(ev)
		}
	}
	if h.logger == nil || !h.logger.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("event", eventNames[k]), slog.String("scope", s.name), slog.String("key", key),
		slog.Int64("wait_ms", wait.Milliseconds())}
	if why != reasonNone {
		attrs = append(attrs, slog.String("reason", why.String()))
	}
	h.logger.LogAttrs(context.WithoutCancel(r.Context()), slog.LevelDebug, "admission", attrs...)
}
