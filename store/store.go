// Package store is what a shared store implements, apart from what a user
// of the transport reads, as database/sql/driver is to database/sql.
//
// A user gives a store to [ratewise.WithStore] (ratewise/redis's Store,
// or a [ratewise.MemoryStore]) and never reads this package. Whoever
// writes a store implements [Store]: the token buckets of told limits
// ([Buckets]), the pauses servers ask for ([Pauses]) and the breakers'
// trips ([Breakers]). A store that keeps what the learned pace learns,
// for a fleet to learn as one, also implements [Learned]; one that can
// answer an attempt's questions in one round trip, [Admitter].
//
// A store's calls are made in the request's goroutine with the call's
// context; they must not block long (a Redis call takes a short timeout
// of its own). When a store fails, the transport goes on with its own
// in-memory state for that request, unless the error wraps
// [ErrUnavailable]: then the store says "fail closed", and the request
// fails without being sent. Every method must be safe for concurrent use.
package store

import (
	"context"
	"errors"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// ErrUnavailable marks a store error that must fail the request rather
// than fall back to the transport's own state: a store whose policy is to
// fail closed wraps it. ratewise.ErrStoreUnavailable is this same error.
var ErrUnavailable = errors.New("ratewise: shared store unavailable")

// Store is a store of every kind the transport shares state through.
type Store interface {
	Buckets
	Pauses
	Breakers
}

// Buckets keeps the token buckets of told limits, shared by every
// transport given the same store. Each call is atomic: two transports
// taking from one bucket at once never both get its last token.
// ratewise.MemoryStore is the reference of what each method does.
type Buckets interface {
	// Take takes n tokens at once from key's bucket of rate r and size
	// burst, and returns 0 when they are there now. Otherwise, when they
	// come within maxWait, it reserves them and returns how long until
	// they come: the caller waits that long and goes without asking
	// again. Reserved tokens not used are not given back. When they do
	// not come within maxWait (0 for a caller that must not wait), it
	// takes nothing, not even part of n, and returns how long until they
	// would be there.
	Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (wait time.Duration, err error)
	// Tokens reports the tokens key's bucket holds now: burst for a
	// bucket never used (or full again and forgotten), less than 0 while
	// tokens not yet come are reserved for waiters. It creates nothing.
	Tokens(ctx context.Context, key string, r rate.Limit, burst int) (float64, error)
	// Give gives back n tokens that Take took and that were not used,
	// so that the next taker has them. The bucket never holds more than
	// burst; a bucket already full (or forgotten) is left alone.
	Give(ctx context.Context, key string, n int, r rate.Limit, burst int) error
}

// BucketCounter is a Buckets that also says, as it takes, how many tokens
// the bucket holds once it has: what a server publishing its quota in
// rate-limit headers needs for every answer, in one call. The admission
// middleware uses it when its store has it.
type BucketCounter interface {
	Buckets
	// TakeCounted is Take, and also returns the tokens key's bucket holds
	// after it, as Tokens would report them at that instant. When Take
	// would take nothing, it takes nothing either.
	TakeCounted(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (wait time.Duration, tokens float64, err error)
}

// Pauses keeps the pauses that servers' wait hints set on keys, shared by
// every transport given the same store.
type Pauses interface {
	// Pause pauses key until until; the later of two pauses wins. The
	// pause forgets itself once over.
	Pause(ctx context.Context, key string, until time.Time) error
	// PausedUntil returns when key's pause ends; the zero time, or a past
	// one, when it is not paused.
	PausedUntil(ctx context.Context, key string) (time.Time, error)
}

// FailsClosed reports whether a store's err asks to fail closed: it wraps
// ErrUnavailable.
func FailsClosed(err error) bool { return errors.Is(err, ErrUnavailable) }

// ScopeKey is the name a transport gives a store for key's state in its
// limit scope named scope (a told bucket, a learned pace): its pause and
// its breaker are named by key alone. A store that spreads its keys over
// nodes (a Redis Cluster) keeps together what has one key, its scopes'
// state included (SplitScopeKey), so that one attempt's questions can be
// answered together. A scope kept for every key at once names key "".
func ScopeKey(scope, key string) string { return scope + scopeSep + key }

// SplitScopeKey is ScopeKey's inverse: the scope and the key of a name
// ScopeKey made, and ok false for any other name (a pause's, a
// breaker's), which is a key alone.
func SplitScopeKey(name string) (scope, key string, ok bool) {
	scope, key, ok = strings.Cut(name, scopeSep)
	return scope, key, ok
}

// scopeSep joins a scope's name and a key: a control character no name a
// user writes holds.
const scopeSep = "\x1f"
