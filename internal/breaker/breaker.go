// Package breaker is the circuit breakers' engine: one gobreaker state
// machine per key, with an escalating cooldown, probe limits and a fast
// path on top, and, with a store.Breakers, the side a fleet shares.
//
// The engine knows nothing of HTTP or of calls. As x/time/rate's Reserve,
// it says what an attempt must do (go, wait this long, wait for the
// probes) and the caller waits within its own budget; the caller reads
// each outcome (a success, a failure, one that does not count) and tells
// it through the attempt's Ticket.
//
// The fast path: while a key's breaker is closed and has counted no
// failure, a success would change nothing that can trip it, so the attempt
// skips gobreaker (two clock readings, two locks and an allocation). Once
// a failure is seen, every attempt goes through gobreaker until its counts
// are clean again; gobreaker still makes every transition.
package breaker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/store"
)

// Outcomes told to gobreaker; errExcluded counts neither way.
var (
	errFailure      = errors.New("ratewise: failure")
	errExcluded     = errors.New("ratewise: not counted")
	errProbeTimeout = errors.New("ratewise: breaker probe timed out")
)

// Config is the breakers' policy, defaults filled in.
type Config struct {
	// Rules are when to trip, the cooldown of each level, the decay and
	// the probe's timeout: what a store needs of the policy too.
	Rules store.Rules
	// HalfOpenProbes probes may be in flight while half-open, and
	// SuccessesToClose of them in a row close the breaker.
	HalfOpenProbes   int
	SuccessesToClose int
	// Notify is told of every change, outside any lock; nil for none.
	Notify func(Change)
	// Hear tells heard, a Ticket's Heard, of a change its attempt caused:
	// the caller's own listener, kept as it is, so that a ticket holds it
	// without a closure made for each attempt.
	Hear func(heard any, c Change)
	// gen counts the configurations: a key's gobreaker built under an
	// older one is built again once its breaker is clean, so that its
	// Window and SuccessesToClose change too.
	gen uint64
}

// Change is a change of a key's breaker, as Config.Notify hears it.
type Change struct {
	Key      string
	From, To store.State
	// Level is the escalation level, 0 for the first cooldown.
	Level int
	// OpenedAt is when the breaker last opened, and Cause what opened it.
	OpenedAt time.Time
	Cause    store.Cause
	// ResetIn is, on a change to open, how long the breaker stays open.
	ResetIn time.Duration
}

// Breakers is one breaker per key. It is safe for concurrent use.
type Breakers struct {
	store store.Breakers // fixed before first use
	// tellsLate is set when the caller asks the store through an
	// Admitter, which takes a success told late (see TellLate).
	tellsLate bool
	cfg       atomic.Pointer[Config]
	states    *keyed.Map[state]
}

// Entry is a key's breaker, held by an attempt until its outcome.
type Entry = keyed.Entry[state]

// state is one key's breaker: gobreaker's state machine, and the
// escalation of its cooldown on top.
type state struct {
	// cb is set under mu: at first use, and again, while the breaker is
	// clean, after the config changed (built is the config it was built
	// under).
	cb    atomic.Pointer[gobreaker.TwoStepCircuitBreaker[struct{}]]
	built atomic.Uint64

	// clean is set while the breaker is closed with no failure counted:
	// the fast path is open. gen counts state changes, so that an outcome
	// from before a change is ignored, as gobreaker ignores it.
	clean atomic.Bool
	gen   atomic.Uint64
	// events counts the rate-limit failures counted, one per event (see
	// Ticket.Outcome); eventUntil (Unix nanoseconds) is when the hint of
	// the last one ran out.
	events     atomic.Uint64
	eventUntil atomic.Int64

	mu          sync.Mutex
	state       store.State   // as gobreaker last reported it; guarded by mu
	level       int           // escalation level, 0 is Cooldown; guarded by mu
	openedAt    time.Time     // last trip or failed probe; guarded by mu
	closedAt    time.Time     // when a probe last closed it; guarded by mu
	cause       store.Cause   // what opened it at openedAt; guarded by mu
	failing     store.Cause   // the failure being told to gobreaker; guarded by mu
	openUntil   time.Time     // the current cooldown's end, zero when not open; guarded by mu
	sharedUntil time.Time     // the last openUntil told to the store; guarded by mu
	minCooldown time.Duration // cb's own timeout: no cooldown ends sooner; guarded by mu
	tripFails   int           // failures that led to the last trip; guarded by mu
	probes      int           // probes in flight; guarded by mu
	// failures counts the failures reported, pendingFailures those not yet
	// through gobreaker, to tell when its counts are clean; guarded by mu.
	failures        uint64
	pendingFailures int
	changes         []Change
	hasChanges      atomic.Bool
	// wakes counts what may let an attempt waiting for the half-open
	// breaker's probes through: a state change, a probe done or given
	// back. woken, made by the first waiter, is closed at each; guarded
	// by mu.
	wakes uint64
	woken chan struct{}
	// unsaid is a success not told to the store yet (see TellLate): the
	// store's Gen at its admission plus one, 0 for none. unsaidTimer
	// tells it after UnsaidFor when no admission took it; guarded by mu.
	unsaid      atomic.Uint64
	unsaidTimer *time.Timer
}

// wakeLocked tells the attempts waiting for the probes to look again,
// with st.mu held.
func (st *state) wakeLocked() {
	st.wakes++
	if st.woken != nil {
		close(st.woken)
		st.woken = nil
	}
}

// New returns breakers under cfg, sharing through s when it is not nil;
// a key's state is forgotten idle after it has nothing to remember.
func New(cfg Config, s store.Breakers, idle time.Duration) *Breakers {
	b := &Breakers{store: s}
	b.cfg.Store(&cfg)
	b.states = keyed.New(idle, nil, b.forgettable)
	return b
}

// Config is the configuration in force. It must not be changed.
func (b *Breakers) Config() *Config { return b.cfg.Load() }

// SetConfig puts cfg in force, for each breaker's next decision; a key's
// gobreaker takes its Window and SuccessesToClose once it is clean.
func (b *Breakers) SetConfig(cfg Config) {
	cfg.gen = b.Config().gen + 1
	b.cfg.Store(&cfg)
}

// SetNotify makes notify hear every change, the configuration otherwise
// the same.
func (b *Breakers) SetNotify(notify func(Change)) {
	cfg := *b.Config()
	cfg.Notify = notify
	b.cfg.Store(&cfg)
}

// Store is the store the breakers share, or nil.
func (b *Breakers) Store() store.Breakers { return b.store }

// SetStore shares the breakers through s, before their first use.
func (b *Breakers) SetStore(s store.Breakers) { b.store = s }

// Len is how many keys have a breaker; Keys names them.
func (b *Breakers) Len() int { return b.states.Len() }

// Keys names the keys that have a breaker.
func (b *Breakers) Keys() []string { return b.states.Keys() }

// Kept reports whether key has a breaker; a look that does not count as
// the key's use.
func (b *Breakers) Kept(key string) bool {
	e := b.states.Peek(key)
	if e != nil {
		b.states.Release(e)
	}
	return e != nil
}

// Held names the keys whose breaker an attempt holds, with their holds:
// none once every attempt told its outcome or was withdrawn.
func (b *Breakers) Held() map[string]int {
	held := map[string]int{}
	b.states.Each(func(key string, e *Entry) {
		if n := e.Holds(); n != 0 {
			held[key] = n
		}
	})
	return held
}

// forgettable reports whether evicting st loses nothing: a breaker closed
// with no failure counted, or one whose cooldown is over and whose
// escalation has decayed, with no probe in flight. A breaker that closed
// within the RetripWindow is kept: a trip now would escalate.
func (b *Breakers) forgettable(st *state, now time.Time) bool {
	cfg := b.Config()
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.cb.Load() == nil:
		return true
	case st.probes > 0 || levelAt(st, now, cfg) > 0 ||
		len(cfg.Rules.Cooldowns) > 1 && !st.closedAt.IsZero() && now.Sub(st.closedAt) < cfg.Rules.RetripWindow:
		return false
	case st.state == store.Closed:
		// The sweep asks only after the key has been idle about the idle
		// timeout: a streak of failures that long ago is stale, and
		// window failures are, once the window fits in that time.
		return st.clean.Load() || cfg.Rules.WindowFailures == 0 || cfg.Rules.Window <= b.states.Idle()
	}
	return !st.openUntil.After(now)
}

// Acquire returns key's breaker, made on first use, and made again when
// the config changed and it is clean, closed with no failure counted,
// which loses nothing. One counting failures keeps its counts under the
// thresholds in force; an open or half-open one runs its course first.
// The caller releases it (Release), or a Ticket does.
func (b *Breakers) Acquire(key string) *Entry {
	e := b.states.Acquire(key, true)
	st := &e.State
	cfg := b.Config()
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

// Release lets go of an entry Acquire returned that no Ticket holds.
func (b *Breakers) Release(e *Entry) { b.states.Release(e) }

// build makes key's gobreaker under cfg, with st.mu held. gobreaker calls
// ReadyToTrip and OnStateChange under its own lock: they only record into
// st, taking st.mu after gobreaker's lock, never the other way round.
func (b *Breakers) build(key string, st *state, cfg *Config) {
	settings := gobreaker.Settings{
		Name:        key,
		MaxRequests: uint32(cfg.SuccessesToClose),
		// A hair under Cooldown: our own openUntil decides when a probe may
		// go, and gobreaker, which counts its timeout as passed only after
		// it, must be half-open by that instant.
		Timeout: max(cfg.Rules.Cooldowns[0]-time.Nanosecond, time.Nanosecond),
		ReadyToTrip: func(c gobreaker.Counts) bool {
			p := &b.Config().Rules // SetConfig's thresholds apply at once
			fails := 0             // of the rule that trips
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
		IsExcluded:   func(err error) bool { return err == errExcluded },
	}
	if cfg.Rules.WindowFailures > 0 {
		settings.Interval = cfg.Rules.Window
		settings.BucketPeriod = cfg.Rules.Window / 10
	}
	st.cb.Store(gobreaker.NewTwoStepCircuitBreaker[struct{}](settings))
	st.built.Store(cfg.gen)
	st.minCooldown = cfg.Rules.Cooldowns[0]
	st.clean.Store(true)
}

func fromGobreaker(s gobreaker.State) store.State {
	switch s {
	case gobreaker.StateHalfOpen:
		return store.HalfOpen
	case gobreaker.StateOpen:
		return store.Open
	}
	return store.Closed
}

// recordChange notes a state change, under gobreaker's lock: the escalation
// moves, and the change waits to be reported outside any lock. A change
// of a gobreaker replaced since (built under gen) is not the breaker's.
func (b *Breakers) recordChange(st *state, gen uint64, from, to store.State) {
	now := time.Now()
	cfg := b.Config()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.built.Load() != gen {
		return
	}
	st.state = to
	st.gen.Add(1)
	st.clean.Store(to == store.Closed) // gobreaker clears its counts on every change
	var resetIn time.Duration
	switch to {
	case store.Open:
		level := levelAt(st, now, cfg)
		if from == store.HalfOpen || retripped(st, now, cfg) {
			level++ // a failed probe, or the trouble back soon after it closed
		}
		level = min(level, len(cfg.Rules.Cooldowns)-1)
		// A cooldown shortened since the gobreaker was built still lasts
		// its timeout, after which gobreaker lets a probe through.
		resetIn = max(cfg.Rules.Cooldowns[level], st.minCooldown)
		st.level, st.openedAt, st.cause = level, now, st.failing
		st.openUntil = now.Add(resetIn)
	case store.HalfOpen:
		// gobreaker goes half-open after the base Cooldown; an escalated
		// cooldown still holds until openUntil.
		if !st.openUntil.After(now) {
			st.openUntil = time.Time{}
		}
	case store.Closed:
		st.probes, st.openUntil, st.closedAt = 0, time.Time{}, now
	}
	st.wakeLocked()
	// Recorded whether or not anyone listens: the caller that caused it
	// may (Ticket.SetHeard).
	st.changes = append(st.changes, Change{From: from, To: to, Level: st.level,
		OpenedAt: st.openedAt, ResetIn: resetIn, Cause: st.cause})
	st.hasChanges.Store(true)
}

// retripped reports whether a trip now comes within the RetripWindow of
// the breaker's last closing, with st.mu held.
func retripped(st *state, now time.Time, cfg *Config) bool {
	return cfg.Rules.RetripWindow > 0 && !st.closedAt.IsZero() && now.Sub(st.closedAt) < cfg.Rules.RetripWindow
}

// levelAt is the escalation level after the quiet Decays since the last
// trip, with st.mu held.
func levelAt(st *state, now time.Time, cfg *Config) int {
	return DecayedLevel(st.level, st.openedAt, now, cfg.Rules.Decay)
}

// DecayedLevel is an escalation level reached at since, one step lower for
// each quiet decay until now.
func DecayedLevel(level int, since, now time.Time, decay time.Duration) int {
	if level == 0 || decay <= 0 {
		return level
	}
	return max(level-int(now.Sub(since)/decay), 0)
}

// report tells the listeners of the changes recorded, outside any lock,
// and heard too (through Config.Hear) when it is not nil.
func (b *Breakers) report(key string, st *state, heard any) {
	if !st.hasChanges.Load() {
		return
	}
	st.mu.Lock()
	changes := st.changes
	st.changes = nil
	st.hasChanges.Store(false)
	st.mu.Unlock()
	cfg := b.Config()
	for _, c := range changes {
		c.Key = key
		if cfg.Notify != nil {
			cfg.Notify(c)
		}
		if heard != nil && cfg.Hear != nil {
			cfg.Hear(heard, c)
		}
	}
}
