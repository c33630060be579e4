package store

import (
	"context"
	"strconv"
	"time"
)

// Breakers keeps the trips of breakers, shared by every transport given
// the same store: failures counted across them, an open (its end and
// escalation level) seen by all, and one probe at a time when its cooldown
// is over. Each transport keeps its own breaker as well.
type Breakers interface {
	// BreakerAdmit reads key's breaker for a request about to be sent.
	// Half-open, it grants the probe to one request at a time, for
	// rules.ProbeTimeout at most, or until it is released.
	BreakerAdmit(ctx context.Context, key string, rules *Rules) (Breaker, error)
	// BreakerRead reads key's breaker as BreakerAdmit would, without
	// granting a probe or creating anything: for statuses.
	BreakerRead(ctx context.Context, key string, rules *Rules) (Breaker, error)
	// BreakerReleaseProbe gives back the probe granted as probeID, whose
	// outcome will not be told, so that another request may probe at
	// once. A probe granted since to another request is left alone.
	BreakerReleaseProbe(ctx context.Context, key string, probeID uint64) error
	// BreakerFailed records a failure described by cause: the breaker
	// trips when the failures counted reach the rules, or at once when
	// the request was the half-open breaker's probe. A trip within
	// rules.RetripWindow of the last closing opens it one level up.
	BreakerFailed(ctx context.Context, key string, probe bool, cause Cause, rules *Rules) (Breaker, error)
	// BreakerSucceeded records a success: it clears the failures counted,
	// and a probe's success closes the breaker.
	BreakerSucceeded(ctx context.Context, key string, probe bool, rules *Rules) error
	// BreakerTripped records that a transport's own breaker for key
	// opened: the shared breaker opens too, the later end and the higher
	// level winning, with the trip's cause when it opens.
	BreakerTripped(ctx context.Context, key string, trip Trip, rules *Rules) error
}

// State is a breaker's state; its values are ratewise.BreakerState's.
type State uint8

// The states of a breaker.
const (
	Closed State = iota
	HalfOpen
	Open
)

// String returns "closed", "half-open" or "open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case HalfOpen:
		return "half-open"
	case Open:
		return "open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Cause is what tripped a breaker, as ratewise.BreakerCause tells it.
type Cause struct {
	// StatusCode is the response's status; 0 when there was none.
	StatusCode int
	// Class is the ratewise.Class of the response, as a number.
	Class uint8
	// Detail is a line of the response's body or the error, redacted.
	Detail string
}

// Breaker is a breaker's state as a store keeps it.
type Breaker struct {
	State State
	// Until is when an open breaker lets a probe through.
	Until time.Time
	// Level is the escalation level of the cooldown, 0 for the first.
	Level int
	// Probe is set when the request admitted is the half-open breaker's
	// probe, and ProbeID names it for BreakerReleaseProbe; the store
	// picks it, unique per key.
	Probe   bool
	ProbeID uint64
	// Failures counts the failures since the last success, and Gen
	// every failure the closed breaker ever counted: a success of a
	// request admitted at Gen clears only if Gen grew meanwhile (see
	// AdmitAsk.Succeeded); Admit and BreakerAdmit fill it in.
	Failures int
	Gen      uint64
	// OpenedAt is when the breaker last opened and Cause what opened it,
	// as far as the store keeps them; only BreakerRead must fill them.
	OpenedAt time.Time
	Cause    Cause
}

// Trip is a trip of a transport's own breaker, told to its store.
type Trip struct {
	// OpenedAt is when it opened, Until when it lets a probe through.
	OpenedAt, Until time.Time
	// Level is the escalation level of the cooldown.
	Level int
	Cause Cause
}

// Rules are what a store needs of a ratewise.BreakerPolicy, defaults
// filled in: when to trip, for how long, how the cooldown escalates and
// decays, and how long a probe may take.
type Rules struct {
	ConsecutiveFailures int
	// WindowFailures within Window also trip, when set.
	WindowFailures int
	Window         time.Duration
	// Cooldowns are the cooldown of each level: the policy's Cooldown,
	// then its Escalation.
	Cooldowns    []time.Duration
	Decay        time.Duration
	ProbeTimeout time.Duration
	// RetripWindow is how soon after the breaker closed a trip opens it
	// one level up; 0 when such a trip starts from the decayed level.
	RetripWindow time.Duration
}
