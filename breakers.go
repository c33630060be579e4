package ratewise

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// This file is BreakerPolicy at work: a gobreaker state machine per key,
// with the escalating cooldown, the probe limits and the fast path on top.
//
// The fast path: while a key's breaker is closed and has counted no
// failure, a success would change nothing that can trip it, so the
// attempt skips gobreaker (two clock readings, two locks and an
// allocation). Once a failure is seen, every attempt goes through
// gobreaker until its counts are clean again. An outcome of a fast
// attempt that must count (a failure, or a success after a failure) is
// told to gobreaker when it is known; gobreaker still makes every
// transition.
//
// Rate-limit events: a server that runs out of quota refuses every
// request in flight at that moment, and those refusals are one event,
// not one failure each. A key counts the rate-limit failures it has
// counted (events); an attempt notes that count when it is sent, and its
// refusal counts only if no other was counted since: the first refusal
// of a burst counts, its siblings, sent before it was seen, count neither
// way. Nor does a refusal that comes before the wait hint of the last
// event counted ran out: its request did not honour that hint (a short
// hint is answered by the pace, which is still searching). Refusals of
// requests sent after one was seen and after its hint, honouring the
// pace, are new events, and those are what trip a breaker. The fast path
// pays one atomic load at the send for this; the refusal path a clock
// reading and a reading of the hint.
//
// Waiting for a probe: an attempt that finds the half-open breaker's
// probe slots taken waits for them (the probes' outcome, or a slot given
// back) within its wait budget, then looks again: closed, it goes; open
// again, it waits out the new cooldown if that fits, as any attempt that
// finds the breaker open.

// Outcomes told to gobreaker; errBreakerExcluded counts neither way.
var (
	errBreakerFailure  = errors.New("ratewise: failure")
	errBreakerExcluded = errors.New("ratewise: not counted")
	errProbeTimeout    = errors.New("ratewise: breaker probe timed out")
)

// breakers is BreakerPolicy at work: one breaker per key.
type breakers struct {
	policy BreakerPolicy
	rules  BreakerRules // what the policy's Store needs of it
	states *keyed[breakerState]
	// notify is told of every change: the policy's OnStateChange, the
	// transport's trace and counters. Set once the transport is built;
	// nil when nobody listens.
	notify func(key string, from, to BreakerState)
}

// breakerState is one key's breaker: gobreaker's state machine, and the
// escalation of its cooldown on top.
type breakerState struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}] // set once, under mu

	// clean is set while the breaker is closed with no failure counted:
	// the fast path is open. gen counts state changes, so that an outcome
	// from before a change is ignored, as gobreaker ignores it.
	clean atomic.Bool
	gen   atomic.Uint64
	// events counts the rate-limit failures counted, one per event: an
	// attempt notes it when sent, and its refusal is a sibling of an
	// event already counted when it has moved since. eventUntil (Unix
	// nanoseconds) is when the server's hint of the last one ran out: a
	// refusal before then is of a request that did not honour it.
	events     atomic.Uint64
	eventUntil atomic.Int64

	mu          sync.Mutex
	state       BreakerState // as gobreaker last reported it; guarded by mu
	level       int          // escalation level, 0 is Cooldown; guarded by mu
	levelSince  time.Time    // last trip or failed probe; guarded by mu
	openUntil   time.Time    // the current cooldown's end, zero when not open; guarded by mu
	sharedUntil time.Time    // the last openUntil told to the policy's Store; guarded by mu
	tripFails   int          // failures that led to the last trip; guarded by mu
	probes      int          // probes in flight; guarded by mu
	// failures counts the failures reported, pendingFailures those not yet
	// through gobreaker, to tell when its counts are clean; guarded by mu.
	failures        uint64
	pendingFailures int
	changes         []stateChange
	hasChanges      atomic.Bool
	// wakes counts what may let an attempt waiting for the half-open
	// breaker's probes through: a state change, a probe done or given
	// back. woken, made by the first waiter, is closed at each; guarded
	// by mu.
	wakes uint64
	woken chan struct{}
}

// wakeLocked tells the attempts waiting for the probes to look again,
// with st.mu held.
func (st *breakerState) wakeLocked() {
	st.wakes++
	if st.woken != nil {
		close(st.woken)
		st.woken = nil
	}
}

type stateChange struct{ from, to BreakerState }

func newBreakers(p BreakerPolicy) *breakers {
	b := &breakers{policy: p, rules: p.Rules()}
	b.states = newKeyed(p.IdleTimeout, nil, b.forgettable)
	return b
}

// forgettable reports whether evicting st loses nothing: a breaker closed
// with no failure counted, or one whose cooldown is over and whose
// escalation has decayed, with no probe in flight.
func (b *breakers) forgettable(st *breakerState, now time.Time) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.cb == nil:
		return true
	case st.probes > 0 || b.levelAt(st, now) > 0:
		return false
	case st.state == BreakerClosed:
		// The sweep asks only after the key has been idle about
		// IdleTimeout: a streak of failures that long ago is stale, and
		// window failures are, once the window fits in that time.
		return st.clean.Load() || b.policy.WindowFailures == 0 || b.policy.Window <= b.states.idle
	}
	return !st.openUntil.After(now)
}

// acquire returns key's breaker, made on first use.
func (b *breakers) acquire(key string) *keyedEntry[breakerState] {
	e := b.states.acquire(key, true)
	if e.state.clean.Load() {
		return e
	}
	e.state.mu.Lock()
	if e.state.cb == nil {
		b.build(key, &e.state)
	}
	e.state.mu.Unlock()
	return e
}

// build makes key's gobreaker, with st.mu held. gobreaker calls
// ReadyToTrip and OnStateChange under its own lock: they only record into
// st, taking st.mu after gobreaker's lock, never the other way round.
func (b *breakers) build(key string, st *breakerState) {
	p := b.policy
	settings := gobreaker.Settings{
		Name:        key,
		MaxRequests: uint32(p.SuccessesToClose),
		// A hair under Cooldown: our own openUntil decides when a probe may
		// go, and gobreaker, which counts its timeout as passed only after
		// it, must be half-open by that instant.
		Timeout: max(p.Cooldown-time.Nanosecond, time.Nanosecond),
		ReadyToTrip: func(c gobreaker.Counts) bool {
			fails := 0 // of the rule that trips
			switch {
			case c.ConsecutiveFailures >= uint32(p.ConsecutiveFailures):
				fails = int(c.ConsecutiveFailures)
			case p.WindowFailures > 0 && c.TotalFailures >= uint32(p.WindowFailures):
				fails = int(c.TotalFailures)
			default:
				return false
			}
			st.mu.Lock()
			st.tripFails = fails
			st.mu.Unlock()
			return true
		},
		OnStateChange: func(_ string, from, to gobreaker.State) { b.recordChange(st, fromGobreaker(from), fromGobreaker(to)) },
		IsSuccessful:  func(err error) bool { return err == nil },
		IsExcluded:    func(err error) bool { return err == errBreakerExcluded },
	}
	if p.WindowFailures > 0 {
		settings.Interval = p.Window
		settings.BucketPeriod = p.Window / 10
	}
	st.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](settings)
	st.clean.Store(true)
}

// recordChange notes a state change, under gobreaker's lock: the escalation
// moves, and the change waits to be reported outside any lock.
func (b *breakers) recordChange(st *breakerState, from, to BreakerState) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.state = to
	st.gen.Add(1)
	st.clean.Store(to == BreakerClosed) // gobreaker clears its counts on every change
	switch to {
	case BreakerOpen:
		level := b.levelAt(st, now)
		if from == BreakerHalfOpen {
			level = min(level+1, len(b.rules.Cooldowns)-1) // a failed probe
		}
		st.level, st.levelSince = level, now
		st.openUntil = now.Add(b.rules.Cooldowns[level])
	case BreakerHalfOpen:
		// gobreaker goes half-open after the base Cooldown; an escalated
		// cooldown still holds until openUntil.
		if !st.openUntil.After(now) {
			st.openUntil = time.Time{}
		}
	case BreakerClosed:
		st.probes, st.openUntil = 0, time.Time{}
	}
	st.wakeLocked()
	if b.notify != nil {
		st.changes = append(st.changes, stateChange{from, to})
		st.hasChanges.Store(true)
	}
}

// levelAt is the escalation level after the quiet Decays since the last
// trip, with st.mu held.
func (b *breakers) levelAt(st *breakerState, now time.Time) int {
	return decayedLevel(st.level, st.levelSince, now, b.policy.Decay)
}

// decayedLevel is an escalation level reached at since, one step lower
// for each quiet decay until now.
func decayedLevel(level int, since, now time.Time, decay time.Duration) int {
	if level == 0 || decay <= 0 {
		return level
	}
	return max(level-int(now.Sub(since)/decay), 0)
}

// report tells notify of the changes recorded, outside any lock.
func (b *breakers) report(key string, st *breakerState) {
	if !st.hasChanges.Load() {
		return
	}
	st.mu.Lock()
	changes := st.changes
	st.changes = nil
	st.hasChanges.Store(false)
	st.mu.Unlock()
	for _, c := range changes {
		b.notify(key, c.from, c.to)
	}
}

// admit lets an attempt through key's breaker. While the breaker is open
// it waits for the reset when that fits the call's budget, else returns a
// *CircuitOpenError. The ticket takes the attempt's outcome.
func (b *breakers) admit(c *call, key string, e *keyedEntry[breakerState]) (breakerTicket, error) {
	shared, asked, err := b.admitShared(c, key)
	if err != nil {
		return breakerTicket{}, err
	}
	t, err := b.admitLocal(c, key, e)
	if err != nil {
		if shared.Probe {
			b.releaseProbe(c, key, shared.ProbeID)
		}
		b.publishTrip(c.ctx, key, &e.state) // told again, if telling it failed
		return t, err
	}
	t.sharedProbe, t.sharedProbeID = shared.Probe, shared.ProbeID
	t.sharedClosed = asked && shared.State == BreakerClosed
	return t, nil
}

// admitShared lets an attempt through the breaker the store shares, when
// there is one: an open one waits or refuses as a local one does; a
// half-open one lets its one probe through, and the others wait for its
// outcome, asking the store again, as long as the budget lasts. It
// reports asked false when there is no store, or it failed: that leaves
// the local breaker alone to decide, unless the store fails closed.
func (b *breakers) admitShared(c *call, key string) (sb SharedBreaker, asked bool, err error) {
	if b.policy.Store == nil {
		return SharedBreaker{}, false, nil
	}
	poll := sharedProbePoll
	for {
		sb, err = b.policy.Store.BreakerAdmit(c.ctx, key, &b.rules)
		switch {
		case err != nil && c.ctx.Err() != nil:
			return sb, false, c.ctx.Err()
		case err != nil && storeFailedClosed(err):
			return sb, false, &CircuitOpenError{Key: key, State: BreakerOpen.String(), Err: err}
		case err != nil:
			return SharedBreaker{}, false, nil
		case sb.State == BreakerHalfOpen && !sb.Probe:
			// Another transport probes: ask again in a while.
			d := min(poll, c.budgetLeft())
			if d <= 0 || c.waitAdmission(d, WaitBreaker) != nil {
				if err := c.ctx.Err(); err != nil {
					return sb, true, err
				}
				return sb, true, &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: sb.Failures}
			}
			poll = min(2*poll, maxSharedProbePoll)
			continue
		case sb.State != BreakerOpen:
			return sb, true, nil
		}
		resetIn := time.Until(sb.Until)
		if resetIn <= 0 {
			continue // over while we asked: ask again, for the probe
		}
		if err := c.waitBreakerReset(key, resetIn, 0); err != nil {
			return sb, true, err
		}
	}
}

// How often an attempt asks the store again while another transport
// holds the shared breaker's probe: at first soon, as a probe's answer
// takes about as long as any request's, then less often, for a probe
// that hangs or a server that is slow.
const (
	sharedProbePoll    = 25 * time.Millisecond
	maxSharedProbePoll = time.Second
)

// minEventLength is how long a rate-limit event lasts at least, and
// without a wait hint: a second, the shortest wait Retry-After can ask.
const minEventLength = time.Second

// waitBreakerReset waits out an open breaker's resetIn, or, when that does
// not fit, refuses the call with the breaker's error.
func (c *call) waitBreakerReset(key string, resetIn time.Duration, fails int) error {
	err := c.waitAdmission(resetIn, WaitBreaker)
	if err == nil || c.ctx.Err() != nil {
		return err
	}
	return &CircuitOpenError{Key: key, State: BreakerOpen.String(), ResetIn: resetIn, Failures: fails}
}

// releaseProbe gives the store's probe back: the attempt it was granted to
// will not tell an outcome. It is told even when the call was cancelled,
// or every transport would wait out ProbeTimeout.
func (b *breakers) releaseProbe(c *call, key string, id uint64) {
	_ = b.policy.Store.BreakerReleaseProbe(context.WithoutCancel(c.ctx), key, id)
}

// admitLocal lets an attempt through this transport's breaker for key.
func (b *breakers) admitLocal(c *call, key string, e *keyedEntry[breakerState]) (breakerTicket, error) {
	st := &e.state
	for {
		gen := st.gen.Load()
		if st.clean.Load() {
			return breakerTicket{b: b, key: key, entry: e, fast: true, gen: gen}, nil
		}
		st.mu.Lock()
		// wakes is read before asking gobreaker, so that a probe done
		// after the asking wakes the attempt it refused.
		openUntil, fails, wakes := st.openUntil, st.tripFails, st.wakes
		st.mu.Unlock()
		if !openUntil.IsZero() {
			if resetIn := time.Until(openUntil); resetIn > 0 {
				if err := c.waitBreakerReset(key, resetIn, fails); err != nil {
					return breakerTicket{}, err
				}
				continue
			}
		}
		done, err := st.cb.Allow()
		b.report(key, st)
		switch {
		case errors.Is(err, gobreaker.ErrOpenState):
			// Not expected: gobreaker's timeout ends before our openUntil.
			return breakerTicket{}, &CircuitOpenError{Key: key, State: BreakerOpen.String(), Failures: fails}
		case err != nil: // half-open with every probe taken
			if err := c.waitProbes(key, st, wakes, fails); err != nil {
				return breakerTicket{}, err
			}
			continue
		}
		st.mu.Lock()
		probe := st.state == BreakerHalfOpen
		if probe && st.probes >= b.policy.HalfOpenProbes {
			st.mu.Unlock()
			done(errBreakerExcluded)
			if err := c.waitProbes(key, st, wakes, fails); err != nil {
				return breakerTicket{}, err
			}
			continue
		}
		if probe {
			st.probes++
		}
		st.mu.Unlock()
		t := breakerTicket{b: b, key: key, entry: e, done: done}
		if probe {
			t.probe = &probeGuard{ticket: t} // its timer starts when the probe is sent
		}
		return t, nil
	}
}

// waitProbes waits, within the call's budget, until the half-open
// breaker's probes in flight are done or one of them is given back, or
// the breaker changes: anything after the wakes seen may let the attempt
// through. When the budget (or the context's deadline) runs out first, it
// refuses the call, half-open.
func (c *call) waitProbes(key string, st *breakerState, seen uint64, fails int) error {
	st.mu.Lock()
	if st.wakes != seen {
		st.mu.Unlock()
		return nil // already: look again
	}
	if st.woken == nil {
		st.woken = make(chan struct{})
	}
	woken := st.woken
	st.mu.Unlock()
	if c.budgetLeft() > 0 {
		err := c.waitUntil(woken, time.Time{}, WaitBreaker, 0)
		if err == nil || c.ctx.Err() != nil {
			return err
		}
	}
	return &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: fails}
}

// breakerTicket is an admitted attempt whose outcome its breaker awaits.
// It is a value, so an attempt that is no probe allocates nothing for it.
// It holds its key's entry, so the breaker is not evicted under it, until
// the outcome is told or the attempt withdrawn.
type breakerTicket struct {
	b     *breakers // nil: no breaker
	key   string
	entry *keyedEntry[breakerState]
	done  func(error) // gobreaker's, unless fast
	probe *probeGuard // set for a half-open probe
	fast  bool        // admitted without gobreaker, in generation gen
	gen   uint64
	event uint64 // the key's rate-limit events when the attempt was sent
	// With a store: whether the attempt is the shared breaker's probe (and
	// its name), or was admitted while the shared breaker was closed.
	sharedProbe   bool
	sharedClosed  bool
	sharedProbeID uint64
}

// openedSince reports whether the breaker that admitted the attempt has
// opened since. A probe is what an open breaker lets through, so never;
// an attempt admitted while the breaker was clean costs two atomic loads
// while it stays clean.
func (t breakerTicket) openedSince() bool {
	if t.b == nil || t.probe != nil {
		return false
	}
	st := &t.entry.state
	if t.fast && st.gen.Load() == t.gen && st.clean.Load() {
		return false
	}
	st.mu.Lock()
	openUntil := st.openUntil
	st.mu.Unlock()
	return !openUntil.IsZero() && time.Until(openUntil) > 0
}

// sent notes the rate-limit events its key has counted so far, and starts
// a probe's timeout: a probe that hangs past ProbeTimeout counts as a
// failure. A probe waiting to be sent does not hang.
func (t *breakerTicket) sent() {
	if t.b == nil {
		return
	}
	t.event = t.entry.state.events.Load()
	if g := t.probe; g != nil {
		g.timer = time.AfterFunc(t.b.policy.ProbeTimeout, func() { g.complete(errProbeTimeout) })
	}
}

// outcome tells the breaker how the attempt went: a failure per IsFailure,
// nothing at all when the call's own context ended it, or when it is a
// rate-limit refusal of an event already counted. The store is told only
// what counts here.
func (t breakerTicket) outcome(c *call, resp *http.Response, err error, class Class) {
	if t.b == nil {
		return
	}
	limited := err == nil && (class == RateLimited || resp.StatusCode == http.StatusTooManyRequests)
	var result error
	switch {
	case err != nil && c.ctx.Err() != nil:
		result = errBreakerExcluded
	case t.b.policy.IsFailure != nil:
		if t.b.policy.IsFailure(resp, err) {
			result = errBreakerFailure
		}
	case err != nil || limited || resp.StatusCode >= 500:
		result = errBreakerFailure
	}
	if limited && result == errBreakerFailure && !t.newEvent(c, resp) {
		result = errBreakerExcluded // a sibling
	}
	t.outcomeShared(c, result)
	switch {
	case t.probe != nil:
		t.probe.finish(result) // releases the entry
		t.b.publishTrip(c.ctx, t.key, &t.entry.state)
		return
	case t.fast:
		t.lateReport(result)
	default:
		t.report(result)
	}
	t.b.publishTrip(c.ctx, t.key, &t.entry.state)
	t.b.states.release(t.entry)
}

// newEvent reports whether the attempt's rate-limit refusal resp is a
// new event, and counts it if so: no refusal was counted since the
// attempt was sent, and the hint of the last one counted has run out. Of
// siblings that end at once, one counts. A probe's refusal is always new:
// a probe is sent after the breaker opened.
func (t breakerTicket) newEvent(c *call, resp *http.Response) bool {
	st := &t.entry.state
	now := time.Now()
	probe := t.probe != nil || t.sharedProbe
	if !probe && now.UnixNano() < st.eventUntil.Load() {
		return false // sent within the last event's hint
	}
	if probe {
		st.events.Add(1)
	} else if !st.events.CompareAndSwap(t.event, t.event+1) {
		return false // sent before the last event was seen
	}
	lasts := minEventLength
	if !c.policy.IgnoreRetryAfter {
		if h, ok := WaitHint(resp, now); ok {
			lasts = max(min(h, c.t.maxPause()), minEventLength)
		}
	}
	st.eventUntil.Store(now.Add(lasts).UnixNano())
	return true
}

// outcomeShared tells the store the outcome: every failure, and a success
// when it may clear failures (counted by any transport since the attempt
// was admitted) or closes the breaker. An outcome that does not count gives
// the probe back. A store that fails is left behind: the local breaker has
// counted the outcome.
func (t breakerTicket) outcomeShared(c *call, result error) {
	store := t.b.policy.Store
	switch {
	case store == nil:
	case result == errBreakerExcluded:
		if t.sharedProbe {
			t.b.releaseProbe(c, t.key, t.sharedProbeID)
		}
	case result == errBreakerFailure:
		_, _ = store.BreakerFailed(c.ctx, t.key, t.sharedProbe, &t.b.rules)
	case t.sharedProbe || t.sharedClosed:
		_ = store.BreakerSucceeded(c.ctx, t.key, t.sharedProbe, &t.b.rules)
	}
}

// publishTrip tells the store of a trip of key's local breaker it has not
// heard of yet, so that every transport sharing it opens too. Only a
// store that heard it marks it told: a failed telling is tried again by
// the next attempt's outcome or refusal.
func (b *breakers) publishTrip(ctx context.Context, key string, st *breakerState) {
	store := b.policy.Store
	if store == nil {
		return
	}
	st.mu.Lock()
	until, level, published := st.openUntil, st.level, st.sharedUntil
	st.mu.Unlock()
	if !until.After(published) || !until.After(time.Now()) {
		return
	}
	if store.BreakerTripped(ctx, key, until, level, &b.rules) != nil {
		return
	}
	st.mu.Lock()
	if until.After(st.sharedUntil) {
		st.sharedUntil = until
	}
	st.mu.Unlock()
}

// lateReport tells gobreaker the outcome of a fast attempt, when it must
// count: a failure, or a success after failures. An outcome from before a
// state change is dropped, as gobreaker drops it.
func (t breakerTicket) lateReport(result error) {
	st := &t.entry.state
	if result == errBreakerExcluded || st.gen.Load() != t.gen || result == nil && st.clean.Load() {
		return
	}
	done, err := st.cb.Allow()
	if err == nil {
		t.done = done
		t.report(result)
	} else {
		t.b.report(t.key, st)
	}
}

// report tells gobreaker the outcome, keeps the fast path's flag true to
// gobreaker's counts, and reports any state change.
func (t breakerTicket) report(result error) {
	st := &t.entry.state
	failure := result == errBreakerFailure
	st.mu.Lock()
	if failure {
		st.failures++
		st.pendingFailures++
		st.clean.Store(false)
	}
	failuresBefore := st.failures
	st.mu.Unlock()

	t.done(result)

	if failure {
		st.mu.Lock()
		st.pendingFailures--
		st.mu.Unlock()
	} else if result == nil && !st.clean.Load() && t.settled(failuresBefore) {
		// Counts read only once no failure is on its way to gobreaker, so
		// that they include every failure reported so far.
		counts := st.cb.Counts() // gobreaker's lock, not ours
		st.mu.Lock()
		if st.state == BreakerClosed && st.pendingFailures == 0 && st.failures == failuresBefore &&
			counts.ConsecutiveFailures == 0 && (t.b.policy.WindowFailures == 0 || counts.TotalFailures == 0) {
			st.clean.Store(true)
		}
		st.mu.Unlock()
	}
	t.b.report(t.key, st)
}

// settled reports whether no failure was reported since failuresBefore,
// nor is being told to gobreaker.
func (t breakerTicket) settled(failuresBefore uint64) bool {
	st := &t.entry.state
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pendingFailures == 0 && st.failures == failuresBefore
}

// cancel withdraws an admitted attempt that will not be sent after all: it
// counts neither way, and gives back the store's probe it holds.
func (t *breakerTicket) cancel(c *call) {
	if t.sharedProbe {
		t.b.releaseProbe(c, t.key, t.sharedProbeID)
	}
	switch {
	case t.b == nil:
	case t.probe != nil:
		t.probe.finish(errBreakerExcluded) // releases the entry
	case t.fast:
		t.b.states.release(t.entry)
	default:
		t.report(errBreakerExcluded)
		t.b.states.release(t.entry)
	}
	*t = breakerTicket{}
}

// probeGuard finishes a probe once: with its outcome, or as a failure by
// itself when the probe hangs past ProbeTimeout.
type probeGuard struct {
	ticket breakerTicket
	timer  *time.Timer
	once   sync.Once
}

// finish is called by the request's goroutine, which set the timer, once
// the probe's outcome is known, or when it is withdrawn unsent.
func (g *probeGuard) finish(result error) {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.complete(result)
}

// complete reports the probe's result and releases its entry, the first
// time only; the timer calls it directly.
func (g *probeGuard) complete(result error) {
	g.once.Do(func() {
		st := &g.ticket.entry.state
		st.mu.Lock()
		st.probes = max(st.probes-1, 0)
		st.mu.Unlock()
		g.ticket.report(result)
		// Woken once gobreaker has the outcome, so that an attempt that
		// wakes finds the probe's place free.
		st.mu.Lock()
		st.wakeLocked()
		st.mu.Unlock()
		g.ticket.b.states.release(g.ticket.entry)
	})
}
