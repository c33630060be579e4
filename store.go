package ratewise

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// This file is the seam through which several processes share what the
// transport keeps per key: a limit's token bucket, the cooldown gate's
// pause, a breaker's trips. A store is given to a Limit, a CooldownPolicy
// or a BreakerPolicy; without one, each transport keeps its own state in
// memory, as it always has. The ratewise/redis module keeps it in Redis.
//
// A store's calls are made in the request's goroutine with the call's
// context (a probe given back, which must be even when the call was
// cancelled, with its values but not its end); they must not block long
// (a Redis call takes a short timeout of its own). When a store fails, the transport uses its
// own in-memory state for that request, unless the store's error wraps
// ErrStoreUnavailable: then the store is taken to say "fail closed", and
// the request fails without being sent.

// ErrStoreUnavailable marks a store error that must fail the request
// rather than fall back to the transport's own state: a store whose
// policy is to fail closed wraps it. A request refused so gets an error
// that matches it: a *LimitError, or a *CircuitOpenError.
var ErrStoreUnavailable = errors.New("ratewise: shared store unavailable")

// BucketStore keeps the token buckets of a Limit, shared by every
// transport given the same store. An implementation must be safe for
// concurrent use, and each call atomic: two transports taking from one
// bucket at once never both get its last token. MemoryStore is the
// reference of what each method does.
type BucketStore interface {
	// Take takes n tokens at once from key's bucket of rate r and size
	// burst, and returns 0 when they are there now. The transport asks
	// for 1 for a request, and Transport.Acquire for n from 1 to burst.
	// Otherwise, when they come within maxWait, it reserves them and
	// returns how long until they come: the tokens are the caller's, who
	// waits that long and goes without asking again, so that waiters each
	// ask once rather than all waking to ask again together. Reserved
	// tokens the caller does not use are not given back: the bucket sends
	// fewer requests, never more. When they do not come within maxWait (0
	// for a caller that must not wait), it takes nothing, not even part of
	// n, and returns how long until they would be there, a wait longer
	// than maxWait.
	Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (wait time.Duration, err error)
	// Tokens reports the tokens key's bucket of rate r and size burst
	// holds now: burst for a bucket never used (or full again and
	// forgotten), less than 0 while tokens not yet come are reserved for
	// waiters. It only reads: it creates no bucket and takes nothing.
	// Transport.LimitStatus reports it.
	Tokens(ctx context.Context, key string, r rate.Limit, burst int) (float64, error)
	// Give gives back n tokens that Take took from key's bucket of rate r
	// and size burst and that were not used, so that the next taker has
	// them: a request one scope admitted and a later scope refused, or a
	// waiter that left before its turn. The bucket never holds more than
	// burst; a bucket already full (or forgotten) is left alone.
	Give(ctx context.Context, key string, n int, r rate.Limit, burst int) error
}

// CooldownStore keeps the cooldown gate's pauses, shared by every
// transport given the same store.
type CooldownStore interface {
	// Pause pauses key until until; the later of two pauses wins. The
	// pause forgets itself once over.
	Pause(ctx context.Context, key string, until time.Time) error
	// PausedUntil returns when key's pause ends; the zero time, or a past
	// one, when it is not paused.
	PausedUntil(ctx context.Context, key string) (time.Time, error)
}

// BreakerStore keeps the trips of breakers, shared by every transport
// given the same store: failures counted across them, an open (its end and
// escalation level) seen by all, and one probe at a time when its cooldown
// is over. Each transport keeps its own breaker as well.
type BreakerStore interface {
	// BreakerAdmit reads key's shared breaker for a request about to be
	// sent. Half-open, it grants the probe to one request at a time, for
	// rules.ProbeTimeout at most, or until it is released; a request
	// refused it asks again a little later, while its budget lasts.
	BreakerAdmit(ctx context.Context, key string, rules *BreakerRules) (SharedBreaker, error)
	// BreakerRead reads key's shared breaker as BreakerAdmit would,
	// without granting a probe or creating anything: for statuses.
	BreakerRead(ctx context.Context, key string, rules *BreakerRules) (SharedBreaker, error)
	// BreakerReleaseProbe gives back the probe granted as probeID, whose
	// request was not sent after all or whose outcome does not count (its
	// caller gave up), so that another request may probe at once rather
	// than after ProbeTimeout. A probe granted since to another request
	// is left alone.
	BreakerReleaseProbe(ctx context.Context, key string, probeID uint64) error
	// BreakerFailed records a failure of key's request, described by
	// cause: the breaker trips when the failures counted reach the rules,
	// or at once when the request was the probe of a half-open breaker,
	// and keeps cause as what tripped it. A trip from closed within
	// rules.RetripWindow of the breaker's last closing opens it one level
	// up. The transport tells only failures that count: of a burst of
	// rate-limit refusals, the first it sees, not its siblings.
	BreakerFailed(ctx context.Context, key string, probe bool, cause BreakerCause, rules *BreakerRules) (SharedBreaker, error)
	// BreakerSucceeded records a success: it clears the failures counted,
	// and a probe's success closes the breaker. The transport tells it
	// every success of a request admitted while the breaker was closed, so
	// that only failures in a row across the transports trip it.
	BreakerSucceeded(ctx context.Context, key string, probe bool, rules *BreakerRules) error
	// BreakerTripped records that a transport's own breaker for key
	// opened, as trip says: the shared breaker opens too, the later end
	// and the higher level winning, with the trip's cause when it opens.
	BreakerTripped(ctx context.Context, key string, trip BreakerTrip, rules *BreakerRules) error
}

// BreakerTrip is a trip of a transport's own breaker, told to its store.
type BreakerTrip struct {
	// OpenedAt is when it opened, Until when it lets a probe through.
	OpenedAt, Until time.Time
	// Level is the escalation level of the cooldown.
	Level int
	Cause BreakerCause
}

// SharedBreaker is a breaker's state as a BreakerStore keeps it.
type SharedBreaker struct {
	State BreakerState
	// Until is when an open breaker lets a probe through.
	Until time.Time
	// Level is the escalation level of the cooldown, as in BreakerStatus.
	Level int
	// Probe is set when the request admitted is the half-open breaker's
	// probe.
	Probe bool
	// ProbeID names the probe granted when Probe is set, for
	// BreakerReleaseProbe; the store picks it, unique per key.
	ProbeID uint64
	// Failures counts the failures since the last success.
	Failures int
	// OpenedAt is when the breaker last opened and Cause what opened it,
	// as far as the store keeps them (zero when it does not); only
	// BreakerRead must fill them.
	OpenedAt time.Time
	Cause    BreakerCause
}

// BreakerRules are what a BreakerStore needs of a BreakerPolicy: when to
// trip, for how long, how the cooldown escalates and decays, and how long
// a probe may take.
type BreakerRules struct {
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

// Rules returns the BreakerRules of p, defaults filled in.
func (p BreakerPolicy) Rules() BreakerRules {
	d := p.WithDefaults()
	window := d.Window
	failures := d.ConsecutiveFailures
	r := BreakerRules{ConsecutiveFailures: failures, WindowFailures: d.WindowFailures, Window: window,
		Decay: d.Decay, ProbeTimeout: d.ProbeTimeout, RetripWindow: max(d.RetripWindow, 0)}
	r.Cooldowns = append([]time.Duration{d.Cooldown}, d.Escalation...)
	return r
}

// storeFailedClosed reports whether a store's err asks to fail closed.
func storeFailedClosed(err error) bool { return errors.Is(err, ErrStoreUnavailable) }
