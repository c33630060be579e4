package ratewise

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
)

// DefaultBurst is a token bucket's size when [Limit.Burst] is zero.
const DefaultBurst = 1

// KeyFunc maps a request to the key its state is kept under: one token
// bucket, cooldown or breaker per key.
type KeyFunc func(*http.Request) string

// Host keys a request by its URL's host (with port, when there is one):
// one state per API server. It is the default KeyFunc.
func Host(req *http.Request) string { return req.URL.Host }

// Global puts every request under one key.
func Global(*http.Request) string { return "" }

// ByHeader keys a request by the value of a header, such as the API key
// a plan limit belongs to. The value is hashed, so a credential used as a
// key never shows in statuses, errors or logs.
func ByHeader(name string) KeyFunc {
	return func(req *http.Request) string {
		v := req.Header.Get(name)
		if v == "" {
			return ""
		}
		sum := sha256.Sum256([]byte(v))
		return name + ":" + hex.EncodeToString(sum[:6])
	}
}

// Limit is one client-side limit scope: a pace (a token bucket, a minimum
// spacing between request starts, or one learned from the server) and a
// cap on requests in flight, kept per key.
//
// Where a scope paces requests, a refusal whose wait hint is a second or
// less does not pause the key's other requests in the cooldown gate: the
// pace already spaces them, and pausing for a Retry-After rounded up to
// whole seconds would waste what the server refills meanwhile. The refused
// request itself still waits its hint. Longer hints pause the key as
// always. [WithLimit] may be given several times; a request must
// pass every scope, e.g. per host and global, or per minute and per hour.
//
// The zero value limits nothing. Zero fields mean: no token bucket, no
// spacing, Key Host, every request applies, no concurrency cap, no wait
// limit but the call's budget, no queue cap, no reserve.
type Limit struct {
	// Name labels the scope in statuses and errors; by default "limit N",
	// N counting WithLimit options from 1.
	Name string
	// Rate is the token bucket's refill rate (rate.Every(2*time.Second) is
	// 30 a minute); zero means no bucket, rate.Inf an unlimited one.
	Rate rate.Limit
	// Burst is the bucket's size; zero means DefaultBurst.
	Burst int
	// MinSpacing is the least time between the starts of two requests of
	// one key, as an alternative to Rate; the first request goes at once.
	MinSpacing time.Duration
	// Window makes the scope count requests in a window instead of a
	// bucket: at most Burst requests of a key start in any Window, and the
	// next one waits until the oldest has left it (by 5 ms, for the
	// network between). It holds to a server's
	// fixed window of Burst per Window however the server aligns it, and
	// sends a batch at the quickest such a window allows: Burst at once,
	// then Burst more a Window later. "30 per 10 s" is
	// Limit{Burst: 30, Window: 10 * time.Second}. It needs Burst (at most
	// 65536: each start of the window is remembered), and takes no Rate,
	// MinSpacing, Reserve, Store or Adaptive.
	Window time.Duration
	// SpacingJitter randomises each gap by ±this fraction of MinSpacing,
	// within [0, 1), so that spaced requests do not beat a fixed rhythm.
	SpacingJitter float64
	// Key maps a request to its key in this scope; nil means Host.
	Key KeyFunc
	// Applies, when set, picks the requests the scope limits: the others
	// pass it untouched, neither paced nor counted, and an Adaptive scope
	// learns nothing from them. Nil means every request. Like Key, it is
	// fixed for the scope's life, and is called for every request that
	// reaches the scope: keep it cheap (a header or path test).
	Applies func(*http.Request) bool
	// MaxConcurrent caps the requests of one key in flight, from admission
	// until the response body is closed (or read to its end).
	MaxConcurrent int
	// MaxWait is the longest a request may wait in this scope; a longer
	// wait fails at once with a *LimitError. Zero leaves only the call's
	// wait budget to bound it.
	MaxWait time.Duration
	// FailFast makes a request that would have to wait fail at once with a
	// *LimitError saying when its turn would come (unknown for a
	// concurrency slot). Nothing is sent.
	FailFast bool
	// MaxQueue caps the requests of one key waiting in this scope; the next
	// one fails at once with a *LimitError instead of queueing without end.
	MaxQueue int
	// Reserve is how many tokens of the bucket PriorityLow requests must
	// leave for the others; it needs a Rate and must be below Burst.
	Reserve int
	// IdleTimeout is how long a key's state outlives its last request;
	// zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Adaptive makes the scope learn each key's limit from the server
	// rather than be told it; New adds one such scope by default (see
	// LearnedScope). A key that has seen no rate-limit signal goes
	// unpaced and costs nothing but its first request, which goes alone:
	// the others of its first wave wait for its answer. From its first
	// signal on, a refusal or a count of the quota, the key is paced by
	// what it learned:
	//   - where responses count the quota (X-RateLimit-*, RateLimit-*,
	//     the IETF draft RateLimit and RateLimit-Policy, and vendors'
	//     forms), it sends what the count says is left, less what is on
	//     its way, at once; then what the server refills, as the counts
	//     measure it for a bucket, or nothing until the reset for a
	//     window;
	//   - where only refusals tell, it measures the server's rate between
	//     refusals and paces just under it, climbing while requests
	//     succeed, and the refusals of one event slow it once;
	//   - a server that refills nothing between refusals, or asks for
	//     pauses of more than a second, is taken for a window: the key
	//     waits for the window to reopen, then sends its quota at once.
	// Rate, when set, is a ceiling the pace never passes; Burst is not
	// used. After a breaker that closes again the pace resumes at half.
	// A key forgets what it learned when it goes idle.
	Adaptive bool
	// StartRate is the pace of a key an adaptive scope has not learned
	// yet; zero means unpaced until the key's first signal.
	StartRate rate.Limit
	// Store, when set, keeps the scope's token buckets where several
	// transports share them (ratewise/redis, or a MemoryStore), so that a
	// fleet of processes holds one limit together rather than each its
	// own. It needs a finite Rate, and takes no MinSpacing, Reserve or
	// Adaptive. A request that finds no token waits for the time the store
	// says one comes, within its budget. When the store fails, the
	// scope's own bucket stands in, unless the store fails closed.
	Store BucketStore
}

// paces reports whether the limit sets a pace of its own: a Rate, a
// MinSpacing or a Window.
func (l *Limit) paces() bool {
	return finiteRate(l.Rate) || l.MinSpacing > 0 || l.Window > 0
}

// Validate reports every field of l that is out of range, in one error.
func (l Limit) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: Limit %q: "+format, append([]any{l.Name}, args...)...))
	}
	if l.Rate < 0 || math.IsNaN(float64(l.Rate)) {
		bad("Rate (%v) must not be negative", float64(l.Rate))
	}
	if l.Burst < 0 {
		bad("Burst (%d) must not be negative", l.Burst)
	}
	if l.MinSpacing < 0 {
		bad("MinSpacing (%v) must not be negative", l.MinSpacing)
	}
	switch {
	case l.Window < 0:
		bad("Window (%v) must not be negative", l.Window)
	case l.Window > 0 && (l.Burst < 1 || l.Burst > maxWindowBurst):
		bad("has a Window (%v): it needs Burst (%d), the requests one window admits, from 1 to %d", l.Window, l.Burst, maxWindowBurst)
	case l.Window > 0 && (l.Rate != 0 || l.MinSpacing != 0 || l.Reserve != 0 || l.Store != nil || l.Adaptive):
		bad("has a Window (%v): it takes no Rate (%v), MinSpacing (%v), Reserve (%d), Store or Adaptive (%v)",
			l.Window, float64(l.Rate), l.MinSpacing, l.Reserve, l.Adaptive)
	}
	if l.Adaptive && (l.MinSpacing != 0 || l.Reserve != 0) {
		bad("is Adaptive: it takes no MinSpacing (%v) or Reserve (%d)", l.MinSpacing, l.Reserve)
	}
	if l.StartRate < 0 || math.IsNaN(float64(l.StartRate)) || l.StartRate != 0 && !l.Adaptive {
		bad("StartRate (%v) needs Adaptive and must not be negative", float64(l.StartRate))
	}
	if l.Store != nil && (!finiteRate(l.Rate) || l.MinSpacing != 0 || l.Reserve != 0 || l.Adaptive) {
		bad("has a Store: it needs a finite Rate (%v), and takes no MinSpacing (%v), Reserve (%d) or Adaptive (%v)",
			float64(l.Rate), l.MinSpacing, l.Reserve, l.Adaptive)
	}
	if l.Rate != 0 && l.MinSpacing != 0 {
		bad("has both Rate (%v) and MinSpacing (%v): give each its own WithLimit", float64(l.Rate), l.MinSpacing)
	}
	if math.IsNaN(l.SpacingJitter) || l.SpacingJitter < 0 || l.SpacingJitter >= 1 {
		bad("SpacingJitter (%v) must be within [0, 1)", l.SpacingJitter)
	}
	if l.MaxConcurrent < 0 {
		bad("MaxConcurrent (%d) must not be negative", l.MaxConcurrent)
	}
	if l.MaxWait < 0 {
		bad("MaxWait (%v) must not be negative", l.MaxWait)
	}
	if l.MaxQueue < 0 {
		bad("MaxQueue (%d) must not be negative", l.MaxQueue)
	}
	if l.Reserve < 0 {
		bad("Reserve (%d) must not be negative", l.Reserve)
	} else if l.Reserve > 0 && (l.Rate == 0 || l.Rate == rate.Inf) {
		bad("Reserve (%d) needs a finite Rate", l.Reserve)
	} else if burst := max(l.Burst, DefaultBurst); l.Reserve > 0 && l.Reserve >= burst {
		bad("Reserve (%d) must be below Burst (%d), or low-priority requests could never pass", l.Reserve, burst)
	}
	if l.IdleTimeout < 0 {
		bad("IdleTimeout (%v) must not be negative", l.IdleTimeout)
	}
	return errors.Join(errs...)
}

// WithLimit adds a limit scope; give it once per scope. An invalid Limit
// makes every RoundTrip fail with its validation error. [Transport.AddLimit]
// adds one to a running transport.
func WithLimit(l Limit) Option {
	return func(t *Transport) {
		if l.Name == "" {
			l.Name = fmt.Sprintf("limit %d", len(t.scopes())+1)
		}
		if err := l.Validate(); err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		t.addScope(newScope(l))
	}
}

// LimitError reports a request that a limit scope refused to queue: it
// was not sent; or turns asked of [Transport.Acquire] that it refused:
// none was taken.
type LimitError struct {
	Scope string // the Limit's Name
	Key   string // the request's key in that scope
	// Reason is "fail-fast", "max-wait", "max-queue" or, when a shared
	// store fails closed, "store-unavailable".
	Reason string
	// RetryIn is when a slot should free up, as far as the scope knows; 0
	// when it cannot tell (a concurrency slot).
	RetryIn time.Duration
	// Err, for Reason "store-unavailable", is the failure of the shared
	// store, which fails closed (it matches ErrStoreUnavailable).
	Err error
}

// Unwrap returns Err.
func (e *LimitError) Unwrap() error { return e.Err }

// ErrLimited matches every *LimitError with errors.Is.
var ErrLimited = errors.New("ratewise: client-side limit reached")

// Error says which scope refused, why, and when to come back.
func (e *LimitError) Error() string {
	msg := fmt.Sprintf("ratewise: %s refused the request (%s)", e.Scope, e.Reason)
	if e.RetryIn > 0 {
		msg += fmt.Sprintf("; a slot frees up in %v", e.RetryIn)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrLimited.
func (e *LimitError) Is(target error) bool { return target == ErrLimited }

// scope is a Limit at work: its per-key state. Its name, key and kind are
// fixed; the rest of the Limit can be replaced (SetLimit), so every
// admission reads it once, through limit.
type scope struct {
	name     string
	key      KeyFunc
	applies  func(*http.Request) bool // nil: every request
	adaptive bool
	global   bool // key is Global: one state, whatever the request
	cfg      atomic.Pointer[Limit]
	gen      atomic.Uint64 // SetLimits so far; each state catches up on its next admission
	states   *keyed.Map[scopeState]
	// warm marks, for an adaptive scope, the keys that have had an answer
	// (see scout): a key's hash in the slot its hash picks.
	warm [warmSlots]atomic.Uint64
}

// warmSlots is how many keys an adaptive scope remembers as answered
// without keeping a state for them. Two keys that share a slot take turns:
// the one pushed out scouts again, which costs one round trip.
const warmSlots = 256

// limit is the Limit in force, defaults filled in.
func (s *scope) limit() *Limit { return s.cfg.Load() }

// scopeState is one key's state in a scope.
type scopeState struct {
	mu     sync.Mutex
	gen    atomic.Uint64 // the scope's gen the state is set up for; written under mu
	bucket *rate.Limiter // nil without a Rate, or when Adaptive
	// adapt is what an Adaptive scope learned of the key: nil until the
	// key's first rate-limit signal arms it (or its first request, with a
	// StartRate), then set for the state's life.
	adapt     atomic.Pointer[learn.Pacer]
	nextStart time.Time // with MinSpacing: the earliest next start; guarded by mu
	window    windowLog // with a Window: the starts in it; guarded by mu
	// slots counts the concurrency slots taken, and queued the requests
	// waiting for one, the length of queue: see acquireSlot.
	slots   atomic.Int64
	queued  atomic.Int32
	waiting int           // requests waiting in the scope; guarded by mu
	queue   []*slotWaiter // waiting for a concurrency slot, by priority; guarded by mu
	// scout, for an adaptive scope's key never answered, is closed when
	// the request sent first has its answer; nil when none is out.
	// Guarded by mu.
	scout chan struct{}
}

// slotWaiter is a request waiting for a concurrency slot.
type slotWaiter struct {
	ready    chan struct{} // closed when the slot is handed over
	granted  bool          // guarded by the scopeState's mu
	priority Priority
}

// withDefaults fills the fields whose zero value means a default.
func (l Limit) withDefaults() Limit {
	if l.Key == nil {
		l.Key = Host
	}
	if l.Burst == 0 {
		l.Burst = DefaultBurst
	}
	return l
}

// sameKeyFunc reports whether a and b are the same function: KeyFuncs
// cannot be compared with ==.
func sameKeyFunc(a, b KeyFunc) bool { return sameFunc(a, b) }

// sameFunc reports whether a and b, funcs, run the same code (both nil
// included); funcs cannot be compared with ==.
func sameFunc[F any](a, b F) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func newScope(l Limit) *scope {
	l = l.withDefaults()
	s := &scope{name: l.Name, key: l.Key, applies: l.Applies, adaptive: l.Adaptive, global: sameKeyFunc(l.Key, Global)}
	s.cfg.Store(&l)
	s.states = keyed.New(idleTimeout(l.IdleTimeout), s.initState, s.forgettable)
	return s
}

func (s *scope) initState(st *scopeState) {
	// The generation before the limit: SetLimit stores the limit before
	// it counts the change, so a state never misses one.
	st.gen.Store(s.gen.Load())
	l := s.limit()
	if l.Adaptive {
		return // armed by the key's first signal, or its first admission (admit)
	}
	if finiteRate(l.Rate) { // an unlimited bucket needs no state
		st.bucket = rate.NewLimiter(l.Rate, l.Burst)
	}
}

// lazy reports whether the scope keeps no state for a key that needs
// none: an adaptive scope's key answered without a rate-limit signal, as
// its warm slot says, unless the scope counts slots or paces from the
// start (pacedFromStart). A bucket, a spacing or slots need a state for
// every key.
func (s *scope) lazy() bool {
	if !s.adaptive {
		return false
	}
	l := s.limit()
	return l.MaxConcurrent == 0 && !pacedFromStart(l)
}

// pacedFromStart reports whether an adaptive Limit paces a key before its
// first rate-limit signal: at its StartRate, or under its ceiling.
func pacedFromStart(l *Limit) bool { return l.StartRate > 0 || finiteRate(l.Rate) }

// finiteRate reports whether r is a rate to pace by.
func finiteRate(r rate.Limit) bool { return r != 0 && r != rate.Inf }

// adaptiveCeiling is the Rate an adaptive scope never passes, or +Inf.
func adaptiveCeiling(l *Limit) float64 {
	if finiteRate(l.Rate) {
		return float64(l.Rate)
	}
	return math.Inf(1)
}

// catchUp sets st up for the Limit in force, when SetLimit changed it
// since; with st.mu held. A bucket keeps the tokens it has. The
// generation is read before the limit: SetLimit stores the limit before
// it counts the change, so a state marked up to date never holds an older
// limit than its mark.
func (s *scope) catchUp(st *scopeState, now time.Time) {
	gen := s.gen.Load()
	if st.gen.Load() == gen {
		return
	}
	l := s.limit()
	st.gen.Store(gen)
	switch {
	case s.adaptive:
		if a := st.adapt.Load(); a != nil {
			a.SetCeiling(adaptiveCeiling(l))
		}
	case l.Window > 0:
		st.bucket = nil
		st.window.resize(l.Burst)
	case !finiteRate(l.Rate):
		st.bucket, st.window = nil, windowLog{}
	case st.bucket == nil:
		st.bucket = rate.NewLimiter(l.Rate, l.Burst)
	default:
		st.bucket.SetLimitAt(now, l.Rate)
		st.bucket.SetBurstAt(now, l.Burst)
	}
	// Slots a raised cap frees go to the requests waiting for them.
	s.grantFreeLocked(st, l.MaxConcurrent)
}

// caughtUp sets st up for the Limit in force (catchUp), when SetLimit
// changed it since; st.mu must not be held. It inlines: an admission
// pays two loads for it.
func (s *scope) caughtUp(st *scopeState) {
	if st.gen.Load() != s.gen.Load() {
		s.catchUpLocking(st)
	}
}

// catchUpLocking is catchUp, taking st.mu.
func (s *scope) catchUpLocking(st *scopeState) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s.catchUp(st, time.Now())
}

// forgettable reports whether st holds nothing worth keeping: a full
// bucket, a spacing that has passed, no request in flight.
func (s *scope) forgettable(st *scopeState, now time.Time) bool {
	if a := st.adapt.Load(); a != nil && a.Busy() {
		return false // an idle key's learning may go: it is forgotten by design
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.slots.Load() == 0 && len(st.queue) == 0 && !st.nextStart.After(now) &&
		st.window.idle(now, s.limit().Window) && (st.bucket == nil || st.bucket.TokensAt(now) >= float64(st.bucket.Burst()))
}
