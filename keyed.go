package ratewise

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long per-key state (a limiter's bucket, a
// cooldown, a breaker) is kept after its key was last used, when the
// policy does not say otherwise.
const DefaultIdleTimeout = 10 * time.Minute

// keyedShards spreads keys over this many locks, so that requests for
// different keys seldom wait on each other.
const keyedShards = 64

// keyed holds per-key state for one limit scope, the cooldown gate or the
// breakers. It evicts state whose key has been idle for the idle timeout,
// when that state has nothing left to remember (a full bucket, a pause
// that is over, a closed breaker), so memory stays bounded however many
// distinct keys come and go. Entries in use are counted and never evicted.
type keyed[S any] struct {
	shards      [keyedShards]keyedShard[S]
	seed        maphash.Seed
	idle        time.Duration
	init        func(*S)                 // prepares a new key's state; nil leaves it zero
	forgettable func(*S, time.Time) bool // whether evicting the state loses nothing; nil means always
	nextSweep   atomic.Int64             // Unix nanoseconds
}

type keyedShard[S any] struct {
	mu sync.Mutex
	m  map[string]*keyedEntry[S] // guarded by mu
}

// keyedEntry is one key's state, with the bookkeeping eviction needs.
type keyedEntry[S any] struct {
	state    S
	refs     atomic.Int32 // holders; raised under the shard's lock
	lastUsed atomic.Int64 // Unix nanoseconds
}

func newKeyed[S any](idle time.Duration, init func(*S), forgettable func(*S, time.Time) bool) *keyed[S] {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	k := &keyed[S]{seed: maphash.MakeSeed(), idle: idle, init: init, forgettable: forgettable}
	for i := range k.shards {
		k.shards[i].m = make(map[string]*keyedEntry[S])
	}
	return k
}

func (k *keyed[S]) shard(key string) *keyedShard[S] {
	return &k.shards[maphash.String(k.seed, key)%keyedShards]
}

// acquire returns key's entry, creating it when create is set (else nil
// when the key has none), and holds it until release.
func (k *keyed[S]) acquire(key string, now time.Time, create bool) *keyedEntry[S] {
	k.maybeSweep(now)
	sh := k.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e == nil {
		if !create {
			sh.mu.Unlock()
			return nil
		}
		e = new(keyedEntry[S])
		if k.init != nil {
			k.init(&e.state)
		}
		sh.m[key] = e
	}
	e.refs.Add(1)
	sh.mu.Unlock()
	e.lastUsed.Store(now.UnixNano())
	return e
}

// release ends a hold taken by acquire.
func (k *keyed[S]) release(e *keyedEntry[S]) {
	e.lastUsed.Store(time.Now().UnixNano())
	e.refs.Add(-1)
}

// maybeSweep evicts idle state at most twice per idle timeout; the caller
// that wins the race does the sweep, one shard lock at a time.
func (k *keyed[S]) maybeSweep(now time.Time) {
	next := k.nextSweep.Load()
	if now.UnixNano() < next || !k.nextSweep.CompareAndSwap(next, now.Add(k.idle/2).UnixNano()) {
		return
	}
	if next == 0 {
		return // the first call only sets the schedule
	}
	k.sweep(now)
}

func (k *keyed[S]) sweep(now time.Time) {
	idleSince := now.Add(-k.idle).UnixNano()
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.refs.Load() == 0 && e.lastUsed.Load() <= idleSince &&
				(k.forgettable == nil || k.forgettable(&e.state, now)) {
				delete(sh.m, key)
			}
		}
		sh.mu.Unlock()
	}
}

// len returns the number of keys held, for tests and status.
func (k *keyed[S]) len() int {
	n := 0
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
