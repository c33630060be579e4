package ratewise

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Defaults of [BreakerPolicy]: a zero field means the matching constant.
const (
	DefaultConsecutiveFailures = 5
	DefaultBreakerWindow       = 10 * time.Minute
	DefaultBreakerCooldown     = 60 * time.Second
	DefaultBreakerDecay        = time.Hour
	DefaultHalfOpenProbes      = 1
	DefaultProbeTimeout        = 30 * time.Second
)

// BreakerState is a circuit breaker's state.
type BreakerState uint8

const (
	// BreakerClosed lets requests through and counts their failures.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few probes through to test the server.
	BreakerHalfOpen
	// BreakerOpen sends nothing until its cooldown is over.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// MarshalText writes the state's name, for JSON.
func (s BreakerState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func fromGobreaker(s gobreaker.State) BreakerState {
	switch s {
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	case gobreaker.StateOpen:
		return BreakerOpen
	}
	return BreakerClosed
}

// BreakerPolicy configures the per-key circuit breakers, built on
// sony/gobreaker. A breaker trips open after ConsecutiveFailures failures
// in a row, or WindowFailures failures within Window; while open, nothing
// is sent to its key. After the cooldown it lets HalfOpenProbes probes
// through: SuccessesToClose successes close it, one failure opens it
// again for the next, longer cooldown of Escalation. Every quiet Decay
// brings the cooldown one step back down.
//
// The zero value is ready to use: every zero field means its documented
// default.
type BreakerPolicy struct {
	// Key maps a request to its breaker; nil means Host.
	Key KeyFunc
	// ConsecutiveFailures trips the breaker; zero means
	// DefaultConsecutiveFailures.
	ConsecutiveFailures int
	// WindowFailures, when set, also trips the breaker on that many
	// failures within Window, successes or not in between.
	WindowFailures int
	// Window is the rolling window of WindowFailures, kept in ten steps;
	// zero means DefaultBreakerWindow.
	Window time.Duration
	// Cooldown is how long the breaker stays open after it trips; zero
	// means DefaultBreakerCooldown.
	Cooldown time.Duration
	// Escalation lists the cooldowns after failed probes: the first failed
	// probe opens the breaker for Escalation[0], the next for Escalation[1],
	// and so on, staying at the last (e.g. 1h, 6h, 12h, 24h, 48h). Each
	// must be at least Cooldown. Empty means Cooldown every time.
	Escalation []time.Duration
	// Decay is the quiet time, without a trip, after which the cooldown
	// steps one level back down; zero means DefaultBreakerDecay.
	Decay time.Duration
	// HalfOpenProbes is how many probes may be in flight at once while
	// half-open; zero means DefaultHalfOpenProbes.
	HalfOpenProbes int
	// SuccessesToClose is how many probes in a row must succeed to close
	// the breaker; zero means HalfOpenProbes. It may not be below it.
	SuccessesToClose int
	// ProbeTimeout bounds a probe's wait for response headers: a probe that
	// hangs longer counts as a failure. Zero means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// IsFailure decides what counts against the breaker. Nil means
	// rate-limited responses (429, and whatever the retry policy reads as
	// rate-limited), 5xx and network errors; other statuses do not. A
	// request cancelled by its own context never counts.
	IsFailure func(resp *http.Response, err error) bool
	// OnStateChange, when set, is told of every change of a key's breaker.
	// It runs outside any lock of the transport, in the goroutine of the
	// request that caused the change; changes of one key may be reported
	// concurrently.
	OnStateChange func(key string, from, to BreakerState)
	// IdleTimeout is how long a closed breaker outlives its key's last
	// request; zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// WithDefaults returns p with each zero field set to its default.
func (p BreakerPolicy) WithDefaults() BreakerPolicy {
	if p.Key == nil {
		p.Key = Host
	}
	if p.ConsecutiveFailures == 0 {
		p.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if p.Window == 0 {
		p.Window = DefaultBreakerWindow
	}
	if p.Cooldown == 0 {
		p.Cooldown = DefaultBreakerCooldown
	}
	if p.Decay == 0 {
		p.Decay = DefaultBreakerDecay
	}
	if p.HalfOpenProbes == 0 {
		p.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if p.SuccessesToClose == 0 {
		p.SuccessesToClose = p.HalfOpenProbes
	}
	if p.ProbeTimeout == 0 {
		p.ProbeTimeout = DefaultProbeTimeout
	}
	return p
}

// Validate reports every field of p that is out of range, in one error.
func (p BreakerPolicy) Validate() error {
	d := p.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: BreakerPolicy."+format, args...))
	}
	positive := []struct {
		name  string
		value int64
	}{
		{"ConsecutiveFailures", int64(d.ConsecutiveFailures)}, {"Window", int64(d.Window)},
		{"Cooldown", int64(d.Cooldown)}, {"Decay", int64(d.Decay)}, {"HalfOpenProbes", int64(d.HalfOpenProbes)},
		{"SuccessesToClose", int64(d.SuccessesToClose)}, {"ProbeTimeout", int64(d.ProbeTimeout)},
	}
	for _, f := range positive {
		if f.value < 0 {
			bad("%s (%d) must not be negative", f.name, f.value)
		}
	}
	if d.WindowFailures < 0 {
		bad("WindowFailures (%d) must not be negative", d.WindowFailures)
	}
	if d.SuccessesToClose < d.HalfOpenProbes {
		bad("SuccessesToClose (%d) is below HalfOpenProbes (%d)", d.SuccessesToClose, d.HalfOpenProbes)
	}
	if d.ConsecutiveFailures > math.MaxUint32 || d.WindowFailures > math.MaxUint32 || d.SuccessesToClose > math.MaxUint32 {
		bad("counts must fit in 32 bits")
	}
	for i, c := range d.Escalation {
		if c < d.Cooldown {
			bad("Escalation[%d] (%v) is below Cooldown (%v)", i, c, d.Cooldown)
		}
	}
	if d.IdleTimeout < 0 {
		bad("IdleTimeout (%v) must not be negative", d.IdleTimeout)
	}
	return errors.Join(errs...)
}

// WithBreaker adds per-key circuit breakers. An invalid policy makes every
// RoundTrip fail with its validation error.
func WithBreaker(p BreakerPolicy) Option {
	return func(t *Transport) {
		if err := p.Validate(); err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		t.breakers = newBreakers(p.WithDefaults())
	}
}

// ErrCircuitOpen matches every *CircuitOpenError with errors.Is.
var ErrCircuitOpen = errors.New("ratewise: circuit breaker open")

// CircuitOpenError reports a request not sent because its key's breaker
// is open, or half-open with its probes taken, and the reset does not fit
// the call's wait budget.
type CircuitOpenError struct {
	Key      string
	State    string        // "open" or "half-open"
	ResetIn  time.Duration // until the breaker lets a probe through; 0 when half-open
	Failures int           // the failures that tripped it
}

// Error describes the breaker and when it resets.
func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("ratewise: circuit breaker for %s is %s after %d failures; resets in %v",
		e.Key, e.State, e.Failures, e.ResetIn)
}

// Is reports whether target is ErrCircuitOpen.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// MarshalJSON writes the error for tool servers:
// {"error":"circuit_open","key":…,"state":…,"reset_in_seconds":…,"failures":…}.
func (e *CircuitOpenError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Error    string  `json:"error"`
		Key      string  `json:"key"`
		State    string  `json:"state"`
		ResetIn  float64 `json:"reset_in_seconds"`
		Failures int     `json:"failures"`
	}{"circuit_open", e.Key, e.State, e.ResetIn.Seconds(), e.Failures})
}

// Outcomes told to gobreaker; errExcluded counts neither way.
var (
	errBreakerFailure  = errors.New("ratewise: failure")
	errBreakerExcluded = errors.New("ratewise: not counted")
	errProbeTimeout    = errors.New("ratewise: breaker probe timed out")
)

// breakers is BreakerPolicy at work: one breaker per key.
type breakers struct {
	policy BreakerPolicy
	states *keyed[breakerState]
}

// breakerState is one key's breaker: gobreaker's state machine, and the
// escalation of its cooldown on top.
type breakerState struct {
	cb *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu         sync.Mutex
	state      BreakerState // as gobreaker last reported it; guarded by mu
	level      int          // escalation level, 0 is Cooldown; guarded by mu
	levelSince time.Time    // last trip or failed probe; guarded by mu
	openUntil  time.Time    // the current cooldown's end; guarded by mu
	tripFails  int          // failures that led to the last trip; guarded by mu
	probes     int          // probes in flight; guarded by mu
	changes    []stateChange
	hasChanges atomic.Bool
}

type stateChange struct{ from, to BreakerState }

func newBreakers(p BreakerPolicy) *breakers {
	b := &breakers{policy: p}
	b.states = newKeyed(p.IdleTimeout, nil, func(st *breakerState, now time.Time) bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.cb == nil || st.state == BreakerClosed && b.levelAt(st, now) == 0
	})
	return b
}

// acquire returns key's breaker, made on first use.
func (b *breakers) acquire(key string, now time.Time) *keyedEntry[breakerState] {
	e := b.states.acquire(key, now, true)
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
			trip := c.ConsecutiveFailures >= uint32(p.ConsecutiveFailures) ||
				p.WindowFailures > 0 && c.TotalFailures >= uint32(p.WindowFailures)
			if trip {
				st.mu.Lock()
				st.tripFails = int(max(c.ConsecutiveFailures, c.TotalFailures))
				st.mu.Unlock()
			}
			return trip
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
}

// recordChange notes a state change, under gobreaker's lock: the escalation
// moves, and the change waits to be reported outside any lock.
func (b *breakers) recordChange(st *breakerState, from, to BreakerState) {
	now := time.Now()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.state = to
	switch to {
	case BreakerOpen:
		level := b.levelAt(st, now)
		if from == BreakerHalfOpen {
			level = min(level+1, len(b.policy.Escalation)) // a failed probe
		}
		st.level, st.levelSince = level, now
		st.openUntil = now.Add(b.cooldown(level))
	case BreakerClosed:
		st.probes = 0
	}
	if b.policy.OnStateChange != nil {
		st.changes = append(st.changes, stateChange{from, to})
		st.hasChanges.Store(true)
	}
}

// levelAt is the escalation level after the quiet Decays since the last
// trip, with st.mu held.
func (b *breakers) levelAt(st *breakerState, now time.Time) int {
	if st.level == 0 {
		return 0
	}
	steps := int(now.Sub(st.levelSince) / b.policy.Decay)
	return max(st.level-steps, 0)
}

func (b *breakers) cooldown(level int) time.Duration {
	if level == 0 {
		return b.policy.Cooldown
	}
	return b.policy.Escalation[level-1]
}

// report tells OnStateChange of the changes recorded, outside any lock.
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
		b.policy.OnStateChange(key, c.from, c.to)
	}
}

// admit lets an attempt through key's breaker. While the breaker is open
// it waits for the reset when that fits the call's budget, else returns a
// *CircuitOpenError. The ticket takes the attempt's outcome.
func (b *breakers) admit(c *call, key string, st *breakerState) (breakerTicket, error) {
	for {
		now := time.Now()
		st.mu.Lock()
		resetIn, fails := st.openUntil.Sub(now), st.tripFails
		st.mu.Unlock()
		if resetIn > 0 {
			if err := c.waitAdmission(resetIn); err != nil {
				if c.ctx.Err() != nil {
					return breakerTicket{}, err
				}
				return breakerTicket{}, &CircuitOpenError{Key: key, State: BreakerOpen.String(), ResetIn: resetIn, Failures: fails}
			}
			continue
		}
		done, err := st.cb.Allow()
		b.report(key, st)
		switch {
		case errors.Is(err, gobreaker.ErrOpenState):
			// Not expected: gobreaker's timeout ends before our openUntil.
			return breakerTicket{}, &CircuitOpenError{Key: key, State: BreakerOpen.String(), Failures: fails}
		case err != nil: // half-open with every probe taken
			return breakerTicket{}, &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: fails}
		}
		st.mu.Lock()
		probe := st.state == BreakerHalfOpen
		if probe && st.probes >= b.policy.HalfOpenProbes {
			st.mu.Unlock()
			done(errBreakerExcluded)
			return breakerTicket{}, &CircuitOpenError{Key: key, State: BreakerHalfOpen.String(), Failures: fails}
		}
		if probe {
			st.probes++
		}
		st.mu.Unlock()
		t := breakerTicket{b: b, key: key, st: st, done: done}
		if probe {
			g := &probeGuard{ticket: t}
			g.timer = time.AfterFunc(b.policy.ProbeTimeout, func() { g.complete(errProbeTimeout) })
			t.probe = g
		}
		return t, nil
	}
}

// breakerTicket is an admitted attempt whose outcome its breaker awaits.
// It is a value, so an attempt that is no probe allocates nothing for it.
type breakerTicket struct {
	b     *breakers
	key   string
	st    *breakerState
	done  func(error) // nil: no breaker
	probe *probeGuard // set for a half-open probe
}

// probeGuard finishes a probe once: with its outcome, or as a failure by
// itself when the probe hangs past ProbeTimeout.
type probeGuard struct {
	ticket breakerTicket
	timer  *time.Timer
	once   sync.Once
}

// finish is called by the request's goroutine, which set the timer, once
// the probe's outcome is known.
func (g *probeGuard) finish(result error) {
	g.timer.Stop()
	g.complete(result)
}

// complete reports the probe's result, the first time only; the timer
// calls it directly.
func (g *probeGuard) complete(result error) {
	g.once.Do(func() {
		st := g.ticket.st
		st.mu.Lock()
		st.probes = max(st.probes-1, 0)
		st.mu.Unlock()
		g.ticket.report(result)
	})
}

// outcome tells the breaker how the attempt went: a failure per IsFailure,
// nothing at all when the call's own context ended it.
func (t breakerTicket) outcome(c *call, resp *http.Response, err error, class Class) {
	if t.done == nil {
		return
	}
	var result error
	switch {
	case err != nil && c.ctx.Err() != nil:
		result = errBreakerExcluded
	case t.b.policy.IsFailure != nil:
		if t.b.policy.IsFailure(resp, err) {
			result = errBreakerFailure
		}
	case err != nil || class == RateLimited || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		result = errBreakerFailure
	}
	if t.probe != nil {
		t.probe.finish(result)
		return
	}
	t.report(result)
}

// cancel withdraws an admitted attempt that will not be sent after all: it
// counts neither way.
func (t *breakerTicket) cancel() {
	if t.done == nil {
		return
	}
	if t.probe != nil {
		t.probe.finish(errBreakerExcluded)
	} else {
		t.report(errBreakerExcluded)
	}
	*t = breakerTicket{}
}

func (t breakerTicket) report(result error) {
	t.done(result)
	t.b.report(t.key, t.st)
}
