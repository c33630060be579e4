// Package redis keeps what ratewise transports share in Redis, so that a
// fleet of processes calling one API holds one limit together, pauses
// together when the API asks, and trips one breaker. It is its own module,
// so that the core library does not depend on a Redis client:
//
//	import (
//		goredis "github.com/redis/go-redis/v9"
//		rwredis "github.com/ratewise/ratewise/redis"
//	)
//
//	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	defer client.Close()
//	store := rwredis.New(client,
//		rwredis.Options{Prefix: "myservice:"}) // OnFailure: rwredis.FailClosed to never go over
//	tr := ratewise.New(http.DefaultTransport, ratewise.WithStore(store)) // the fleet learns as one
//
// WithStore shares everything the store keeps: the learned pace, and the
// told limits, pauses and breakers of a transport that has them:
//
//	told := ratewise.New(http.DefaultTransport,
//		ratewise.WithStore(store),
//		ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 5}), // 20/s for the fleet
//		ratewise.WithBreaker(ratewise.BreakerPolicy{}),                      // one breaker, one probe, survives restarts
//	)
//
// The Store fields of Limit, PausePolicy and BreakerPolicy share one part
// alone, or each through a store of its own.
//
// A Store is a store.Buckets (a GCRA token bucket, atomic in Redis
// on its clock, that reserves a waiter's turn so that it asks once), a
// store.Pauses (the later of two pauses wins), a
// store.Breakers (failures counted across the fleet, trips with
// their end and escalation level, one probe at a time) and a store.Learned
// (the learned pace of each key, learned from what every replica tells and
// taken from by all, on Redis's clock). Every operation is one round trip
// running one script: there is no lock, and no call waits on another; a
// store.Admitter, it answers an attempt's questions of one key in one
// script, on a Cluster too, whose keys of one request key share a slot.
// Every key it writes expires by itself.
//
// When Redis does not answer within Options.Timeout, the store says so
// to the transport, which goes on with its own in-memory state
// (FallbackLocal, the default) or refuses the request (FailClosed). The
// store logs one line when an outage starts and one when it ends, counts
// outages, and while Redis is down asks it again only every
// Options.Recheck, with one call, so that requests do not each wait out a
// timeout; the calls that come while it asks wait for its answer (at most
// Options.Timeout), so that the first calls after Redis is back take the
// fleet's state, not each process's own. Give
// it a client with ContextTimeoutEnabled, so that go-redis itself ends a
// call at the timeout; see New.
//
// Times are the clocks of the processes, but for the buckets, which use
// Redis's: keep them in sync (NTP) across a fleet.
//
// # Timeouts
//
// New returns a Store on rdb: a *redis.Client, a *redis.ClusterClient (its
// keys use hash tags, so each script's keys share a slot) or a Ring.
//
// Build the client with ContextTimeoutEnabled: true. Without it go-redis
// ignores contexts, and a Redis that stops answering would hold each call
// for the client's ReadTimeout (seconds) whatever Options.Timeout and the
// caller's context say; the store then runs each call in a goroutine of
// its own and stops waiting for it at the timeout, which costs a goroutine
// per call and leaves the abandoned call to end at ReadTimeout. A client
// of another type is treated so too.
package redis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// Failure says what a Store's users do while Redis is unavailable.
type Failure int

const (
	// FallbackLocal keeps each transport working on its own in-memory
	// state: limits hold per process, not for the fleet, until Redis is
	// back. It is the zero value.
	FallbackLocal Failure = iota
	// FailClosed treats a limit as exhausted and a breaker as open: no
	// request is sent while the store cannot be asked. The choice of a team
	// that must never go over an API's limit.
	FailClosed
)

// Defaults of Options.
const (
	DefaultPrefix  = "ratewise:"
	DefaultTimeout = 200 * time.Millisecond
	DefaultRecheck = time.Second
	// DefaultFailuresTTL is how long a breaker's count of consecutive
	// failures lasts without a new failure.
	DefaultFailuresTTL = 10 * time.Minute
)

// Options configure a Store; the zero value is ready to use.
type Options struct {
	// Prefix starts every key the store writes (a bucket's key has "rate:"
	// before it, as redis_rate writes it); zero means DefaultPrefix.
	// Give fleets that must not share state different prefixes.
	Prefix string
	// Timeout bounds each Redis call; zero means DefaultTimeout. A call
	// that outlasts it counts as an outage, even when the caller's
	// context ended meanwhile.
	Timeout time.Duration
	// OnFailure is what happens while Redis is unavailable.
	OnFailure Failure
	// Recheck is how long, during an outage, the store waits before it
	// asks Redis again; zero means DefaultRecheck.
	Recheck time.Duration
	// FailuresTTL is how long a breaker's consecutive failures are kept
	// after the last one; zero means DefaultFailuresTTL.
	FailuresTTL time.Duration
	// Logger, when set, hears of each outage's start and end.
	Logger *slog.Logger
}

// Store keeps ratewise's shared state in Redis. It is safe for concurrent
// use. Use one Store per failure policy; stores with the same Prefix share
// their state.
type Store struct {
	rdb  goredis.UniversalClient
	opts Options
	// bounded is set when the client ends a call at its context's
	// deadline (ContextTimeoutEnabled); otherwise the store stops
	// waiting for it by itself.
	bounded bool

	errors, outages atomic.Int64
	mu              sync.Mutex
	down            bool      // guarded by mu
	downSince       time.Time // guarded by mu
	recheckAt       time.Time // guarded by mu: during an outage, when Redis may be asked again
	// recheck, guarded by mu, is closed when the call asking Redis
	// whether an outage is over ends; nil when no call is asking.
	recheck chan struct{}
}

var _ store.Store = (*Store)(nil)

// New returns a Store on rdb: a *redis.Client, a *redis.ClusterClient (its
// keys use hash tags, so each script's keys share a slot) or a Ring. Build
// the client with ContextTimeoutEnabled: true, or a Redis that stops
// answering holds each call for ReadTimeout (see "Timeouts" in the package
// doc).
func New(rdb goredis.UniversalClient, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	if opts.FailuresTTL <= 0 {
		opts.FailuresTTL = DefaultFailuresTTL
	}
	return &Store{rdb: rdb, opts: opts, bounded: honoursContext(rdb)}
}

// honoursContext reports whether rdb ends a call at its context's
// deadline.
func honoursContext(rdb goredis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Outages returns the outages the store has seen: each begins with a
// failed call after a good one.
func (s *Store) Outages() int64 { return s.outages.Load() }

// Errors returns the calls that failed, Redis's own errors and timeouts
// (not those a caller's context ended before Options.Timeout).
func (s *Store) Errors() int64 { return s.errors.Load() }

// Available reports whether the last call to Redis succeeded.
func (s *Store) Available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.down
}

// errSkipped is the error of a call not made because Redis is down.
var errSkipped = errors.New("redis is unavailable; not asked again yet")

// do runs f against Redis with the store's timeout, keeping count of
// outages; its error says what the transport must do.
func (s *Store) do(ctx context.Context, f func(context.Context) error) error {
	_, err := call(s, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

// call is do for a call that returns a value. The value comes back through
// call's result, not a variable f sets: an abandoned f may still be
// running.
func call[T any](s *Store, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	rechecking, err := s.skip(ctx)
	answered := true // but for a recheck the caller gave up
	switch {
	case err != nil && ctx.Err() != nil:
		return zero, ctx.Err()
	case err != nil:
		return zero, s.fail(err)
	case rechecking:
		defer s.rechecked(&answered)
	}
	start := time.Now()
	callCtx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	v, err := runBounded(s, callCtx, f)
	cancel()
	switch {
	case err == nil || errors.Is(err, goredis.Nil):
		s.noteUp()
		return v, nil
	case callerEnded(ctx) && time.Since(start) < s.opts.Timeout:
		answered = false
		// The caller's own context ended first: Redis is not to blame.
		return zero, cmp.Or(ctx.Err(), context.DeadlineExceeded)
	}
	s.noteDown(err)
	return zero, s.fail(err)
}

// callerEnded reports whether ctx has ended, or reached its deadline: a
// client that honours contexts times its socket out at the deadline, and
// its error can come a moment before ctx.Err() says so.
func callerEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// runBounded runs f, ended by ctx's deadline even when the client ignores
// it: f then runs in a goroutine of its own, which the client's
// ReadTimeout ends.
func runBounded[T any](s *Store, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	if s.bounded {
		return f(ctx)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		select {
		case r := <-done: // answered on the very instant
			return r.v, r.err
		default:
			var zero T
			return zero, ctx.Err()
		}
	}
}

// skip returns errSkipped while an outage's recheck time has not come.
// When it has, the call asks Redis (rechecking is true) and others that
// come meanwhile wait for its answer, as long as a call may take, rather
// than go on by their local state beside it: the first calls after Redis
// is back then take the fleet's state, not each process's own. An asking
// call that ends with no answer (its caller went away) leaves the
// recheck due, and one of those waiting asks in its place.
func (s *Store) skip(ctx context.Context) (rechecking bool, err error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if !s.down {
			s.mu.Unlock()
			return false, nil
		}
		if asking := s.recheck; asking != nil {
			s.mu.Unlock()
			if timer == nil {
				timer = time.NewTimer(s.opts.Timeout) // the whole wait, however many askers
			}
			select {
			case <-asking:
				continue
			case <-timer.C:
				return false, errSkipped
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		now := time.Now()
		if now.Before(s.recheckAt) {
			s.mu.Unlock()
			return false, errSkipped
		}
		s.recheckAt = now.Add(s.opts.Recheck) // this call asks; the others wait for it
		s.recheck = make(chan struct{})
		s.mu.Unlock()
		return true, nil
	}
}

// rechecked ends the call that asked Redis whether an outage is over:
// those waiting for its answer go on. answered is false when the call
// ended with no answer: the recheck is due again at once.
func (s *Store) rechecked(answered *bool) {
	s.mu.Lock()
	if !*answered {
		s.recheckAt = time.Time{}
	}
	close(s.recheck)
	s.recheck = nil
	s.mu.Unlock()
}

func (s *Store) noteUp() {
	s.mu.Lock()
	wasDown, since := s.down, s.downSince
	s.down = false
	s.mu.Unlock()
	if wasDown && s.opts.Logger != nil {
		s.opts.Logger.Info("redis available again", "event", "store_up", "outage_ms", time.Since(since).Milliseconds())
	}
}

func (s *Store) noteDown(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	wasDown := s.down
	if !wasDown {
		s.down, s.downSince = true, time.Now()
		s.recheckAt = s.downSince.Add(s.opts.Recheck)
	}
	s.mu.Unlock()
	if !wasDown {
		s.outages.Add(1)
		if s.opts.Logger != nil {
			s.opts.Logger.Warn("redis unavailable", "event", "store_down", "on_failure", s.opts.OnFailure.String(), "error", err)
		}
	}
}

// fail wraps err as the policy says: ErrStoreUnavailable to fail closed.
func (s *Store) fail(err error) error {
	if s.opts.OnFailure == FailClosed {
		return fmt.Errorf("%w: redis: %w", ratewise.ErrStoreUnavailable, err)
	}
	return fmt.Errorf("ratewise/redis: %w", err)
}

// String returns "fallback-local" or "fail-closed".
func (f Failure) String() string {
	if f == FailClosed {
		return "fail-closed"
	}
	return "fallback-local"
}

// key returns the Redis key of kind for name, a key or a scope's
// (store.ScopeKey): the key in braces, so that a cluster keeps all that
// one key names in one slot, its scopes' state beside its pause and its
// breaker.
func (s *Store) key(kind, name string) string {
	if scope, key, ok := store.SplitScopeKey(name); ok {
		return s.opts.Prefix + kind + ":" + braceless.Replace(scope) + ":{" + key + "}"
	}
	return s.opts.Prefix + kind + ":{" + name + "}"
}

// braceless keeps a scope's name from holding the braces of a hash tag.
var braceless = strings.NewReplacer("{", "(", "}", ")")

// slotKey is the part of name a cluster hashes: the key (see key).
func slotKey(name string) string {
	if _, key, ok := store.SplitScopeKey(name); ok {
		return key
	}
	return name
}

// Take implements store.Buckets with GCRA: one token every 1/r, up
// to burst at once, on Redis's clock; n tokens are n intervals. Tokens
// that come within maxWait are reserved, however many callers wait before
// them.
func (s *Store) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	maxWait = max(maxWait, 0)
	return call(s, ctx, func(ctx context.Context) (time.Duration, error) {
		secs, err := takeScript.Run(ctx, s.rdb, []string{s.bucketKey(key)},
			1/float64(r), max(burst, 1), maxWait.Seconds(), max(n, 1)).Float64()
		if err != nil {
			return 0, err
		}
		return takenWait(secs, maxWait), nil
	})
}

// takenWait reads the wait a take script answered, in seconds, for a
// caller that may wait maxWait: negated when nothing was taken, which is
// said as a wait longer than maxWait, whatever the rounding.
func takenWait(secs float64, maxWait time.Duration) time.Duration {
	if secs < 0 {
		return max(time.Duration(-secs*float64(time.Second)), maxWait+time.Nanosecond)
	}
	return min(limit.TurnDelay(time.Duration(secs*float64(time.Second))), maxWait)
}

// Tokens implements store.Buckets: the tokens key's bucket holds
// on Redis's clock, read by a script that writes nothing.
func (s *Store) Tokens(ctx context.Context, key string, r rate.Limit, burst int) (float64, error) {
	return call(s, ctx, func(ctx context.Context) (float64, error) {
		return tokensScript.Run(ctx, s.rdb, []string{s.bucketKey(key)}, 1/float64(r), max(burst, 1)).Float64()
	})
}

// bucketKey is the Redis key of key's bucket: "rate:" before the store's
// key, as redis_rate writes it.
func (s *Store) bucketKey(key string) string { return "rate:" + s.key("bucket", key) }

// Pause implements store.Pauses: the later pause wins, and the
// key expires when its pause ends.
func (s *Store) Pause(ctx context.Context, key string, until time.Time) error {
	return s.do(ctx, func(ctx context.Context) error {
		return pauseScript.Run(ctx, s.rdb, []string{s.key("pause", key)}, until.UnixMilli()).Err()
	})
}

// PausedUntil implements store.Pauses.
func (s *Store) PausedUntil(ctx context.Context, key string) (time.Time, error) {
	return call(s, ctx, func(ctx context.Context) (time.Time, error) {
		ms, err := s.rdb.Get(ctx, s.key("pause", key)).Int64()
		if err != nil {
			return time.Time{}, err
		}
		return time.UnixMilli(ms), nil
	})
}
