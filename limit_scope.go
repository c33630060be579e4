package ratewise

import (
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
)

// This file is a Limit at work: its scope, one state per key, set up
// and caught up with SetLimit, and forgotten when idle.

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
	// whose slow start ended (see admitStarting): a key's hash in the slot
	// its hash picks.
	warm [warmSlots]atomic.Uint64
	// learnTrace, set by tests before the first request, sees every
	// decision the scope's pacers take (learn.Pacer.SetTrace).
	learnTrace func(format string, args ...any)
}

// warmSlots is how many keys an adaptive scope remembers as answered
// without keeping a state for them. Two keys that share a slot take turns:
// the one pushed out starts slowly again, which costs a few round trips.
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
	adapt atomic.Pointer[learn.Pacer]
	// toldGen is the transport's toldGen when a refusal under told limits
	// armed adapt: told anew since, they are trusted again.
	toldGen   atomic.Uint64
	nextStart time.Time // with MinSpacing: the earliest next start; guarded by mu
	window    windowLog // with a Window: the starts in it; guarded by mu
	// slots counts the concurrency slots taken, and queued the requests
	// waiting for one, the length of queue: see acquireSlot.
	slots   atomic.Int64
	queued  atomic.Int32
	waiting int           // requests waiting in the scope; guarded by mu
	queue   []*slotWaiter // waiting for a concurrency slot, by priority; guarded by mu
	// The slow start of an adaptive scope's key that has learned nothing
	// (see admitStarting): startOpen requests may be in flight, and
	// startOut are; startWake is closed at the next answer, nil when
	// nobody waits for one. Guarded by mu.
	startOpen, startOut int
	startWake           chan struct{}
	// startOKFlight is the most of the key's requests in flight, others,
	// that a request of its slow start was let through with.
	startOKFlight int
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
