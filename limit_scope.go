package ratewise

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/internal/limit"
	"golang.org/x/time/rate"
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
	cfg      atomic.Pointer[scopeConfig]
	gen      atomic.Uint64 // SetLimits so far; each state catches up on its next admission
	states   *keyed.Map[scopeState]
	// answeredKeys marks, for an adaptive scope, the keys whose slow start
	// ended with nothing learned (see admitStarting).
	answeredKeys learn.Answered
	// learnTrace, set by tests before the first request, sees every
	// decision the scope's pacers take (learn.Pacer.SetTrace).
	learnTrace func(format string, args ...any)
}

// scopeConfig is the Limit in force, defaults filled in, and the part of
// it the limit engine takes.
type scopeConfig struct {
	Limit
	engine limit.Config
}

// limit is the Limit in force, defaults filled in.
func (s *scope) limit() *Limit { return &s.cfg.Load().Limit }

// engine is the Limit in force as the limit engine takes it.
func (s *scope) engine() *limit.Config { return &s.cfg.Load().engine }

// setLimit puts l, defaults filled in, in force; SetLimit then counts the
// change (gen), after it, so that a state never misses one.
func (s *scope) setLimit(l Limit) { s.cfg.Store(&scopeConfig{Limit: l, engine: engineLimit(&l)}) }

// engineLimit is the part of l the limit engine takes.
func engineLimit(l *Limit) limit.Config {
	return limit.Config{Rate: l.Rate, Burst: l.Burst, Window: l.Window, MinSpacing: l.MinSpacing,
		SpacingJitter: l.SpacingJitter, Learned: l.Adaptive, MaxConcurrent: l.MaxConcurrent,
		FailFast: l.FailFast, MaxQueue: l.MaxQueue, Reserve: l.Reserve}
}

// scopeState is one key's state in a scope: the told limit's turns and
// slots (the engine's), and what an Adaptive scope learned of the key.
type scopeState struct {
	told limit.Key
	// adapt is what an Adaptive scope learned of the key: nil until the
	// key's first rate-limit signal arms it (or its first request, with a
	// StartRate), then set for the state's life.
	adapt atomic.Pointer[learn.Pacer]
	// toldGen is the transport's toldGen when a refusal under told limits
	// armed adapt: told anew since, they are trusted again.
	toldGen atomic.Uint64
	// shared is this transport's side of the key's learned pace a store
	// keeps for the fleet (see limit_shared.go); nil until asked.
	shared atomic.Pointer[sharedKey]
	// start is the slow start of an adaptive scope's key that has
	// learned nothing (see admitStarting). Guarded by mu.
	mu    sync.Mutex
	start learn.Start
}

func newScope(l Limit) *scope {
	l = l.withDefaults()
	s := &scope{name: l.Name, key: l.Key, applies: l.Applies, adaptive: l.Adaptive, global: sameKeyFunc(l.Key, Global)}
	s.setLimit(l)
	s.states = keyed.New(idleTimeout(l.IdleTimeout), s.initState, s.forgettable)
	return s
}

func (s *scope) initState(st *scopeState) {
	// The generation before the limit: SetLimit stores the limit before
	// it counts the change, so a state never misses one. An adaptive
	// key is armed by its first signal, or its first admission (admit).
	gen := s.gen.Load()
	st.told.Init(gen, s.engine())
}

// lazy reports whether the scope keeps no state for a key that needs
// none: an adaptive scope's key answered without a rate-limit signal, as
// its answered slot says, unless the scope counts slots or paces from the
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
func finiteRate(r rate.Limit) bool { return limit.FiniteRate(r) }

// adaptiveCeiling is the Rate an adaptive scope never passes, or +Inf.
func adaptiveCeiling(l *Limit) float64 {
	if finiteRate(l.Rate) {
		return float64(l.Rate)
	}
	return math.Inf(1)
}

// caughtUp sets st up for the Limit in force, when SetLimit changed it
// since: a bucket keeps its tokens, a learned pace takes the new ceiling.
// It inlines: an admission pays two loads for it.
func (s *scope) caughtUp(st *scopeState) {
	if !st.told.UpToDate(s.gen.Load()) {
		s.catchUp(st)
	}
}

// catchUp is caughtUp's work. The generation is read before the limit:
// SetLimit stores the limit before it counts the change, so a state
// marked up to date never holds an older limit than its mark.
func (s *scope) catchUp(st *scopeState) {
	gen := s.gen.Load()
	cfg := s.cfg.Load()
	st.told.CatchUp(gen, &cfg.engine, time.Now())
	if a := st.adapt.Load(); s.adaptive && a != nil {
		a.SetCeiling(adaptiveCeiling(&cfg.Limit))
	}
}

// forgettable reports whether st holds nothing worth keeping: a full
// bucket, a spacing that has passed, no request in flight.
func (s *scope) forgettable(st *scopeState, now time.Time) bool {
	if a := st.adapt.Load(); a != nil && a.Busy() {
		return false // an idle key's learning may go: it is forgotten by design
	}
	return st.told.Idle(now, s.limit().Window)
}

// refusal is err, the engine's *limit.Refusal, as the *ClientLimitError of key
// in s; any other error as it is.
func (s *scope) refusal(key string, err error) error {
	if r, ok := err.(*limit.Refusal); ok {
		return &ClientLimitError{Scope: s.name, Key: key, Reason: LimitReason(r.Reason), RetryIn: r.RetryIn}
	}
	return err
}

// What follows is a call's side of a limit scope's concurrency slots
// (Limit.MaxConcurrent): the engine (internal/limit) hands them out by
// priority; an attempt waits for one, and its response body holds it.

// acquireSlot takes one of the key's MaxConcurrent slots, queueing by
// priority when all are taken.
func (s *scope) acquireSlot(c *call, key string, st *scopeState, deadline time.Time) error {
	cfg := s.engine()
	w, err := st.told.TakeSlot(cfg, int(c.priority), deadline)
	if err != nil || w == nil {
		return s.refusal(key, err)
	}
	err = c.waitUntil(w.Ready(), deadline, WaitConcurrency, 0)
	st.told.LeaveQueue(w, err, s.limit().MaxConcurrent)
	if err != nil {
		return s.waitError(err, key, deadline, c)
	}
	return nil
}

// releaseSlot frees a concurrency slot; the first waiter, if any, gets
// it.
func (s *scope) releaseSlot(st *scopeState) { st.told.ReleaseSlot(s.limit().MaxConcurrent) }

// heldSlot is a concurrency slot a request holds in a scope.
type heldSlot struct {
	scope *scope
	entry *keyed.Entry[scopeState]
}

// heldSlots are the slots an attempt holds, one per scope with a
// MaxConcurrent.
type heldSlots struct{ holds[heldSlot] }

// release frees every slot held and forgets them.
func (h *heldSlots) release() { h.drain(heldSlot.free) }

func (s heldSlot) free() {
	s.scope.releaseSlot(&s.entry.State)
	s.scope.states.Release(s.entry)
}

// slotBody is a response body whose request holds concurrency slots; they
// are freed when the body is closed or read to its end.
type slotBody struct {
	io.ReadCloser
	released atomic.Bool
	slots    heldSlots
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

// release frees the slots the first time only; a Close racing a Read's
// end frees them once.
func (b *slotBody) release() {
	if b.released.CompareAndSwap(false, true) {
		b.slots.release()
	}
}

// Acquire takes n turns of the limit scope named scope for key, for work
// that does not go through the transport (a gRPC call, a library that hides
// its HTTP client), so that it spends the same budget as the requests. With
// maxWait 0 it does not wait: it returns a *ClientLimitError (Reason "fail-fast",
// and RetryIn) when the turns are not there now; otherwise it waits up to
// maxWait, the Limit's MaxWait and ctx's deadline, or returns "max-wait"
// at once, having taken nothing. See "Turns for work that is not HTTP" in
// the package doc for keys, stores, priorities and what it does not take.
func (t *Transport) Acquire(ctx context.Context, scope, key string, n int, maxWait time.Duration) error {
	if t.err != nil {
		return t.err
	}
	s := t.scopeNamed(scope)
	switch {
	case s == nil:
		scopes := t.scopes()
		names := make([]string, len(scopes))
		for i, s := range scopes {
			names[i] = fmt.Sprintf("%q", s.name)
		}
		return fmt.Errorf("ratewise: Acquire: no limit scope is named %q; the transport's scopes are %s",
			scope, strings.Join(names, ", "))
	case s.adaptive:
		return fmt.Errorf("ratewise: Acquire: limit scope %q is Adaptive: it learns its pace from the responses of the requests it paces and has no turns to take; name a scope with a Rate, a MinSpacing or a Window", scope)
	case n < 1:
		return fmt.Errorf("ratewise: Acquire: n (%d) must be at least 1", n)
	}
	l := s.limit()
	if !l.paces() {
		return nil // nothing to take
	}
	if (finiteRate(l.Rate) || l.Window > 0) && n > l.Burst {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over limit scope %q's Burst (%d): that many turns never come at once; take at most Burst at a time", n, scope, l.Burst)
	}
	o := optionsFrom(ctx)
	if o != nil && o.priority < PriorityNormal && l.Reserve > 0 && n > l.Burst-l.Reserve {
		return fmt.Errorf("ratewise: Acquire: n (%d) is over what a PriorityLow caller may take of limit scope %q at once (Burst %d less Reserve %d); take fewer at a time", n, scope, l.Burst, l.Reserve)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.global {
		key = ""
	}
	e := s.states.Acquire(key, true)
	defer s.states.Release(e)
	st := &e.State
	s.caughtUp(st)

	// A call with no request: maxWait is its whole budget, so that every
	// wait it may start is one that fits, and mayWait refuses the others
	// as a request's MaxWait does.
	c := call{t: t, acquireKey: key, waitBudget: waitBudget{ctx: ctx, own: max(maxWait, 0)}}
	if o != nil {
		c.priority, c.stats, c.trace, c.endpoint = o.priority, o.stats, o.trace, o.endpoint
	}
	limit := *l
	if maxWait <= 0 {
		limit.FailFast = true
	}
	now := time.Now()
	wait := c.own
	if l.MaxWait > 0 {
		wait = min(wait, l.MaxWait)
	}
	if end, ok := ctx.Deadline(); ok {
		wait = min(wait, end.Sub(now)-time.Nanosecond) // a wait must end before the deadline
	}
	cfg := engineLimit(&limit)
	err := s.pace(&c, key, st, now.Add(max(wait, 0)), &limit, &cfg, n)
	if err != nil && ctx.Err() == nil {
		// A wait that outgrew the deadline between the check and the
		// wait (the clock moved) is a wait too long, as the check says.
		var late pastDeadlineError
		if errors.As(err, &late) {
			return &ClientLimitError{Scope: s.name, Key: key, Reason: LimitMaxWait, RetryIn: late.wait}
		}
	}
	return err
}

// scopeNamed returns the scope named name, or nil.
func (t *Transport) scopeNamed(name string) *scope {
	for _, s := range t.scopes() {
		if s.name == name {
			return s
		}
	}
	return nil
}

// scopes returns the limit scopes, in the order given. The slice is never
// changed: AddLimit replaces it.
func (t *Transport) scopes() []*scope { return *t.scopeList.Load() }
