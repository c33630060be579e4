package ratewise

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/store"
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
	// key and store are the policy's, fixed for the transport's life.
	key    KeyFunc
	store  store.Breakers
	cfg    atomic.Pointer[breakerConfig] // SetBreakerPolicy replaces it
	states *keyed.Map[breakerState]
}

// breakerConfig is the BreakerPolicy in force, and what derives from it.
type breakerConfig struct {
	policy BreakerPolicy // defaults filled in
	rules  store.Rules   // what the policy's Store needs of it
	// notify is told of every change: the policy's OnStateChange and the
	// transport's trace; nil when nobody listens.
	notify func(BreakerChange)
	// gen counts the configurations: a key's gobreaker built under an
	// older one is built again once its breaker is clean, so that its
	// Window and SuccessesToClose change too.
	gen uint64
}

// breakerState is one key's breaker: gobreaker's state machine, and the
// escalation of its cooldown on top.
type breakerState struct {
	// cb is set under mu: at first use, and again, while the breaker is
	// clean, after the policy changed (built is the config it was built
	// under).
	cb    atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	built atomic.Uint64

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
	state       BreakerState  // as gobreaker last reported it; guarded by mu
	level       int           // escalation level, 0 is Cooldown; guarded by mu
	openedAt    time.Time     // last trip or failed probe; guarded by mu
	closedAt    time.Time     // when a probe last closed it; guarded by mu
	cause       BreakerCause  // what opened it at openedAt; guarded by mu
	failing     BreakerCause  // the failure being told to gobreaker; guarded by mu
	openUntil   time.Time     // the current cooldown's end, zero when not open; guarded by mu
	sharedUntil time.Time     // the last openUntil told to the policy's Store; guarded by mu
	minCooldown time.Duration // cb's own timeout: no cooldown ends sooner; guarded by mu
	tripFails   int           // failures that led to the last trip; guarded by mu
	probes      int           // probes in flight; guarded by mu
	// failures counts the failures reported, pendingFailures those not yet
	// through gobreaker, to tell when its counts are clean; guarded by mu.
	failures        uint64
	pendingFailures int
	changes         []BreakerChange
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

func newBreakers(p BreakerPolicy) *breakers {
	b := &breakers{key: p.Key, store: p.Store}
	b.cfg.Store(&breakerConfig{policy: p, rules: p.Rules()})
	b.states = keyed.New(idleTimeout(p.IdleTimeout), nil, b.forgettable)
	return b
}

// config is the policy in force.
func (b *breakers) config() *breakerConfig { return b.cfg.Load() }

// forgettable reports whether evicting st loses nothing: a breaker closed
// with no failure counted, or one whose cooldown is over and whose
// escalation has decayed, with no probe in flight. A breaker that closed
// within the RetripWindow is kept: a trip now would escalate.
func (b *breakers) forgettable(st *breakerState, now time.Time) bool {
	cfg := b.config()
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.cb.Load() == nil:
		return true
	case st.probes > 0 || b.levelAt(st, now, cfg) > 0 ||
		len(cfg.rules.Cooldowns) > 1 && !st.closedAt.IsZero() && now.Sub(st.closedAt) < cfg.rules.RetripWindow:
		return false
	case st.state == BreakerClosed:
		// The sweep asks only after the key has been idle about
		// IdleTimeout: a streak of failures that long ago is stale, and
		// window failures are, once the window fits in that time.
		return st.clean.Load() || cfg.policy.WindowFailures == 0 || cfg.policy.Window <= b.states.Idle()
	}
	return !st.openUntil.After(now)
}

// acquire returns key's breaker, made on first use, and made again when
// the policy changed and it is clean, closed with no failure counted,
// which loses nothing. One counting failures keeps its counts under the
// thresholds in force; an open or half-open one runs its course first.
func (b *breakers) acquire(key string) *keyed.Entry[breakerState] {
	e := b.states.Acquire(key, true)
	st := &e.State
	cfg := b.config()
	if st.clean.Load() && st.built.Load() == cfg.gen {
		return e
	}
	st.mu.Lock()
	if st.cb.Load() == nil || st.built.Load() != cfg.gen && st.clean.Load() {
		b.build(key, st, cfg)
	}
	st.mu.Unlock()
	return e
}

// build makes key's gobreaker under cfg, with st.mu held. gobreaker calls
// ReadyToTrip and OnStateChange under its own lock: they only record into
// st, taking st.mu after gobreaker's lock, never the other way round.
func (b *breakers) build(key string, st *breakerState, cfg *breakerConfig) {
	p := cfg.policy
	settings := gobreaker.Settings{
		Name:        key,
		MaxRequests: uint32(p.SuccessesToClose),
		// A hair under Cooldown: our own openUntil decides when a probe may
		// go, and gobreaker, which counts its timeout as passed only after
		// it, must be half-open by that instant.
		Timeout: max(p.Cooldown-time.Nanosecond, time.Nanosecond),
		ReadyToTrip: func(c gobreaker.Counts) bool {
			p := &b.config().policy // SetBreakerPolicy's thresholds apply at once
			fails := 0              // of the rule that trips
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
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.recordChange(st, cfg.gen, fromGobreaker(from), fromGobreaker(to))
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err == errBreakerExcluded },
	}
	if p.WindowFailures > 0 {
		settings.Interval = p.Window
		settings.BucketPeriod = p.Window / 10
	}
	st.cb.Store(gobreaker.NewTwoStepCircuitBreaker[struct{}](settings))
	st.built.Store(cfg.gen)
	st.minCooldown = p.Cooldown
	st.clean.Store(true)
}

// recordChange notes a state change, under gobreaker's lock: the escalation
// moves, and the change waits to be reported outside any lock. A change
// of a gobreaker replaced since (built under gen) is not the breaker's.
func (b *breakers) recordChange(st *breakerState, gen uint64, from, to BreakerState) {
	now := time.Now()
	cfg := b.config()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.built.Load() != gen {
		return
	}
	st.state = to
	st.gen.Add(1)
	st.clean.Store(to == BreakerClosed) // gobreaker clears its counts on every change
	var resetIn time.Duration
	switch to {
	case BreakerOpen:
		level := b.levelAt(st, now, cfg)
		if from == BreakerHalfOpen || b.retripped(st, now, cfg) {
			level++ // a failed probe, or the trouble back soon after it closed
		}
		level = min(level, len(cfg.rules.Cooldowns)-1)
		// A cooldown shortened since the gobreaker was built still lasts
		// its timeout, after which gobreaker lets a probe through.
		resetIn = max(cfg.rules.Cooldowns[level], st.minCooldown)
		st.level, st.openedAt, st.cause = level, now, st.failing
		st.openUntil = now.Add(resetIn)
	case BreakerHalfOpen:
		// gobreaker goes half-open after the base Cooldown; an escalated
		// cooldown still holds until openUntil.
		if !st.openUntil.After(now) {
			st.openUntil = time.Time{}
		}
	case BreakerClosed:
		st.probes, st.openUntil, st.closedAt = 0, time.Time{}, now
	}
	st.wakeLocked()
	// Recorded whether or not the transport listens: the trace of the
	// call that caused it may.
	st.changes = append(st.changes, BreakerChange{From: from, To: to, Level: st.level,
		OpenedAt: st.openedAt, ResetIn: resetIn, Cause: st.cause})
	st.hasChanges.Store(true)
}

// retripped reports whether a trip now comes within the RetripWindow of
// the breaker's last closing, with st.mu held.
func (b *breakers) retripped(st *breakerState, now time.Time, cfg *breakerConfig) bool {
	return cfg.rules.RetripWindow > 0 && !st.closedAt.IsZero() && now.Sub(st.closedAt) < cfg.rules.RetripWindow
}

// levelAt is the escalation level after the quiet Decays since the last
// trip, with st.mu held.
func (b *breakers) levelAt(st *breakerState, now time.Time, cfg *breakerConfig) int {
	return decayedLevel(st.level, st.openedAt, now, cfg.policy.Decay)
}

// decayedLevel is an escalation level reached at since, one step lower
// for each quiet decay until now.
func decayedLevel(level int, since, now time.Time, decay time.Duration) int {
	if level == 0 || decay <= 0 {
		return level
	}
	return max(level-int(now.Sub(since)/decay), 0)
}

// report tells the listeners of the changes recorded, outside any lock.
func (b *breakers) report(key string, st *breakerState) { b.reportTo(key, st, nil) }

// reportTo is report, which also tells heard, the trace of the call whose
// attempt caused the changes, when it listens.
func (b *breakers) reportTo(key string, st *breakerState, heard func(BreakerChange)) {
	if !st.hasChanges.Load() {
		return
	}
	st.mu.Lock()
	changes := st.changes
	st.changes = nil
	st.hasChanges.Store(false)
	st.mu.Unlock()
	notify := b.config().notify
	for _, c := range changes {
		c.Key = key
		if notify != nil {
			notify(c)
		}
		if heard != nil {
			heard(c)
		}
	}
}

// admit lets an attempt through key's breaker. While the breaker is open
// it waits for the reset when that fits the call's budget, else returns a
// *CircuitOpenError. The ticket takes the attempt's outcome.
func (b *breakers) admit(c *call, key string, e *keyed.Entry[breakerState]) (breakerTicket, error) {
	shared, asked, err := b.admitShared(c, key)
	if err != nil {
		return breakerTicket{}, err
	}
	t, err := b.admitLocal(c, key, e)
	if err != nil {
		if shared.Probe {
			b.releaseProbe(c, key, shared.ProbeID)
		}
		b.publishTrip(c.ctx, key, &e.State) // told again, if telling it failed
		return t, err
	}
	t.sharedProbe, t.sharedProbeID = shared.Probe, shared.ProbeID
	t.sharedClosed = asked && shared.State == store.Closed
	return t, nil
}

// waitBreakerReset waits out an open breaker's resetIn, or, when that does
// not fit or the policy fails fast, refuses the call with the breaker's
// error.
func (c *call) waitBreakerReset(key string, resetIn time.Duration, fails int) error {
	if c.t.breakers.config().policy.FailFast {
		return &CircuitOpenError{Key: key, State: BreakerOpen.String(), ResetIn: resetIn, Failures: fails}
	}
	err := c.waitAdmission(resetIn, WaitBreaker)
	if err == nil || c.ctx.Err() != nil {
		return err
	}
	return &CircuitOpenError{Key: key, State: BreakerOpen.String(), ResetIn: resetIn, Failures: fails}
}

// admitLocal lets an attempt through this transport's breaker for key.
func (b *breakers) admitLocal(c *call, key string, e *keyed.Entry[breakerState]) (breakerTicket, error) {
	st := &e.State
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
		done, err := st.cb.Load().Allow()
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
		if probe && st.probes >= b.config().policy.HalfOpenProbes {
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
// through. When the budget (or the context's deadline) runs out first, or
// the policy fails fast, it refuses the call, half-open.
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
	if c.budgetLeft() > 0 && !c.t.breakers.config().policy.FailFast {
		err := c.waitUntil(woken, time.Time{}, WaitBreaker, 0)
		if err == nil || c.ctx.Err() != nil {
			return err
		}
	}
	return &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: fails}
}
