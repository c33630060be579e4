package scopes

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// This file is a scope: its configuration, one state per key, set up and
// caught up with Set, and forgotten when idle.

// Config is a scope's limit as the engine takes it: the told limit
// (internal/limit's Config) and what a scope adds to it.
type Config struct {
	limit.Config
	// MaxWait bounds a request's wait for its turn; 0 for none.
	MaxWait time.Duration
	// StartRate is the pace of a key an adaptive scope has learned
	// nothing of, in requests a second; 0 for none (a slow start).
	StartRate float64
	// Store keeps the scope's token bucket for the fleet; nil for none.
	Store store.Buckets
}

// Paces reports whether the limit sets a pace of its own: a Rate, a
// MinSpacing or a Window.
func (c *Config) Paces() bool {
	return limit.FiniteRate(c.Rate) || c.MinSpacing > 0 || c.Window > 0
}

// Pace is the limit's pace in requests a second, for one that paces: its
// Rate, one per MinSpacing, or Burst per Window.
func (c *Config) Pace() float64 {
	switch {
	case c.Window > 0:
		return float64(c.Burst) / c.Window.Seconds()
	case c.MinSpacing > 0:
		return 1 / c.MinSpacing.Seconds()
	}
	return float64(c.Rate)
}

// pacedFromStart reports whether an adaptive scope paces a key before its
// first rate-limit signal: at its StartRate, or under its ceiling.
func (c *Config) pacedFromStart() bool { return c.StartRate > 0 || limit.FiniteRate(c.Rate) }

// ceiling is the Rate an adaptive scope never passes, or +Inf.
func (c *Config) ceiling() float64 {
	if limit.FiniteRate(c.Rate) {
		return float64(c.Rate)
	}
	return math.Inf(1)
}

// Shared is what the scopes of one transport share: the stores that keep
// a key's state for the fleet, the count of told limits changed, and the
// span of the trials of refusals held back from the store.
type Shared struct {
	// Learned keeps what adaptive scopes learn, for the fleet (see
	// shared.go); nil when this transport learns alone.
	Learned store.Learned
	// Windows keeps told windows' starts; nil for none.
	Windows store.Windows
	// ToldGen counts the told limits changed or added: a key that
	// learned under older ones forgets it (see admitOwn).
	ToldGen atomic.Uint64
	// trialsUntil is, in Unix nanoseconds, when the last trial of a
	// refusal held back from Learned stops taking answers as let through
	// (see trialRefusal): until then, successes are read for it.
	trialsUntil atomic.Int64
}

// Scope is a limit at work: its per-key state. Its name and kind are
// fixed; its Config can be replaced (Set), so every admission reads it
// once.
type Scope struct {
	name     string
	adaptive bool
	global   bool // one state, whatever the key
	shared   *Shared
	cfg      atomic.Pointer[Config]
	// lazy is lazyFor(cfg), kept with it: every admission reads it.
	lazy   atomic.Bool
	gen    atomic.Uint64 // Sets so far; each state catches up on its next admission
	states *keyed.Map[State]
	// answered marks, for an adaptive scope, the keys whose slow start
	// ended with nothing learned (see admitStarting).
	answered learn.Answered
	// Trace, set by tests before the first request, sees every decision
	// the scope's pacers take (learn.Pacer.SetTrace).
	Trace func(format string, args ...any)
}

// State is one key's state in a scope: the told limit's turns and slots
// (the engine's), and what an adaptive scope learned of the key.
type State struct {
	told limit.Key
	// adapt is what an adaptive scope learned of the key: nil until the
	// key's first rate-limit signal arms it (or its first request, with a
	// StartRate), then set for the state's life.
	adapt atomic.Pointer[learn.Pacer]
	// toldGen is Shared.ToldGen when a refusal under told limits armed
	// adapt: told anew since, they are trusted again.
	toldGen atomic.Uint64
	// fleet is this transport's side of the key's learned pace a store
	// keeps for the fleet (see shared.go); nil until asked.
	fleet atomic.Pointer[sharedKey]
	// start is the slow start of an adaptive scope's key that has
	// learned nothing (see admitStarting). Guarded by mu.
	mu    sync.Mutex
	start learn.Start
}

// New returns the scope named name, adaptive or told, keeping one state
// for every key (global) or one per key, each forgotten after idle, under
// cfg; shared is its transport's.
func New(name string, adaptive, global bool, idle time.Duration, cfg Config, shared *Shared) *Scope {
	s := &Scope{name: name, adaptive: adaptive, global: global, shared: shared}
	cfg.Learned = adaptive
	s.cfg.Store(&cfg)
	s.lazy.Store(s.lazyFor(&cfg))
	s.states = keyed.New(idle, s.initState, s.forgettable)
	return s
}

// Name is the scope's name.
func (s *Scope) Name() string { return s.name }

// Adaptive reports whether the scope learns its keys' pace.
func (s *Scope) Adaptive() bool { return s.adaptive }

// Global reports whether the scope keeps one state for every key.
func (s *Scope) Global() bool { return s.global }

// Config is the limit in force.
func (s *Scope) Config() *Config { return s.cfg.Load() }

// Set puts cfg in force, then counts the change, after it, so that a
// state never misses one; waiters for a slot see a new MaxConcurrent at
// once.
func (s *Scope) Set(cfg Config) {
	cfg.Learned = s.adaptive
	old := s.cfg.Load()
	s.cfg.Store(&cfg)
	s.lazy.Store(s.lazyFor(&cfg))
	s.gen.Add(1)
	if cfg.MaxConcurrent != old.MaxConcurrent {
		// Requests waiting for a slot would otherwise not see a raised cap
		// until one frees.
		s.states.Each(func(_ string, e *keyed.Entry[State]) { s.caughtUp(&e.State) })
	}
}

// Len is how many keys the scope holds a state for.
func (s *Scope) Len() int { return s.states.Len() }

// Keys returns the keys the scope holds a state for, in no order.
func (s *Scope) Keys() []string { return s.states.Keys() }

// Holding calls f for every key whose state is held by a request or
// holds one: a hold of its entry, a concurrency slot taken, a request
// waiting for one or queued for a turn. A scope no request goes through
// holds nothing.
func (s *Scope) Holding(f func(key string, holds, slots, waiting, queued int)) {
	s.states.Each(func(key string, e *keyed.Entry[State]) {
		if slots, waiting, queued := e.State.told.Pending(); e.Holds() != 0 || slots != 0 || waiting != 0 || queued != 0 {
			f(key, e.Holds(), slots, waiting, queued)
		}
	})
}

func (s *Scope) initState(st *State) {
	// The generation before the limit: Set stores the limit before it
	// counts the change, so a state never misses one. An adaptive key is
	// armed by its first signal, or its first admission.
	gen := s.gen.Load()
	st.told.Init(gen, &s.cfg.Load().Config)
}

// lazyFor reports whether the scope, under cfg, keeps no state for a key
// that needs none: an adaptive scope's key answered without a rate-limit
// signal, as its answered slot says, unless the scope counts slots or
// paces from the start. A bucket, a spacing or slots need a state for
// every key.
func (s *Scope) lazyFor(cfg *Config) bool {
	return s.adaptive && cfg.MaxConcurrent == 0 && !cfg.pacedFromStart()
}

// caughtUp sets st up for the limit in force, when Set changed it since:
// a bucket keeps its tokens, a learned pace takes the new ceiling. It
// inlines: an admission pays two loads for it.
func (s *Scope) caughtUp(st *State) {
	if !st.told.UpToDate(s.gen.Load()) {
		s.catchUp(st)
	}
}

// catchUp is caughtUp's work. The generation is read before the limit:
// Set stores the limit before it counts the change, so a state marked up
// to date never holds an older limit than its mark.
func (s *Scope) catchUp(st *State) {
	gen := s.gen.Load()
	cfg := s.cfg.Load()
	st.told.CatchUp(gen, &cfg.Config, time.Now())
	if a := st.adapt.Load(); s.adaptive && a != nil {
		a.SetCeiling(cfg.ceiling())
	}
}

// forgettable reports whether st holds nothing worth keeping: a full
// bucket, a spacing that has passed, no request in flight.
func (s *Scope) forgettable(st *State, now time.Time) bool {
	if a := st.adapt.Load(); a != nil && a.Busy() {
		return false // an idle key's learning may go: it is forgotten by design
	}
	return st.told.Idle(now, s.cfg.Load().Window)
}

// StoreKey is key's state in a store (its bucket, its learned pace):
// named by the scope's name and the key, no key when the scope is
// global, so that scopes sharing a store keep theirs apart.
func (s *Scope) StoreKey(key string) string {
	if s.global {
		return store.ScopeKey(s.name, "")
	}
	return store.ScopeKey(s.name, key)
}

// Refusal is a request the scope will not let wait for its turn: the
// scope, the key, why ("fail-fast", "max-wait", "max-queue",
// "store-unavailable"), how long the turn was away (0 when unknown) and,
// for a store that failed closed, its error.
type Refusal struct {
	Scope, Key, Reason string
	RetryIn            time.Duration
	Err                error
}

func (r *Refusal) Error() string {
	return "scope " + r.Scope + " refused key " + r.Key + ": " + r.Reason
}

// refusal is err, the limit engine's *limit.Refusal, as a *Refusal of key;
// any other error as it is.
func (s *Scope) refusal(key string, err error) error {
	if r, ok := err.(*limit.Refusal); ok {
		return &Refusal{Scope: s.name, Key: key, Reason: r.Reason, RetryIn: r.RetryIn}
	}
	return err
}

// Status is what a scope holds of one key: the told limit's snapshot,
// and what was learned (Learned false when nothing was).
type Status struct {
	Told    limit.Snapshot
	Learned bool
	Pace    learn.Status
}

// Look reports what the scope holds of key at now, and false when it
// holds no state for it.
func (s *Scope) Look(key string, now time.Time) (Status, bool) {
	if s.global {
		key = ""
	}
	e := s.states.Peek(key)
	if e == nil {
		return Status{}, false
	}
	defer s.states.Release(e)
	st := &e.State
	out := Status{Told: st.told.Snapshot(now, &s.cfg.Load().Config)}
	if a := st.adapt.Load(); a != nil {
		out.Learned, out.Pace = true, a.Snapshot(now)
	}
	return out, true
}

// Yield makes key's told window yield (limit.Key.Yield) from now, for
// the refusal of the turn that took start: a refusal of a turn it gave
// says the server counts more strictly, which a spread of the same quota
// answers sooner than the refusal's hint. It
// reports true when the refused turn was one a server's turn freed
// early instead, or when the refusal says the server's window is about
// to turn (due): the window holds to its own count again, or tries again
// a little later, and the refusal says nothing of the server's limit.
func (s *Scope) Yield(key string, start, now time.Time, due bool) (early bool) {
	e := s.states.Acquire(key, true)
	early = e.State.told.Yield(start, now, due, &s.cfg.Load().Config)
	s.states.Release(e)
	return early
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
