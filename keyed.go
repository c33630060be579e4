package ratewise

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long per-key state (a limiter's bucket, a
// cooldown, a breaker) is kept at least after its key was last used, when
// the policy does not say otherwise; it goes by half as long again at most.
const DefaultIdleTimeout = 10 * time.Minute

const (
	// keyedShards spreads keys over this many locks, so that requests for
	// different keys seldom wait on each other.
	keyedShards = 64
	// sweepCheckEvery is how many lookups of known keys pass between two
	// looks at the clock to see whether a sweep is due; a new key always
	// looks. Reading the clock on every request would cost more than the
	// lookup itself.
	sweepCheckEvery = 1024
)

// keyed holds per-key state for one limit scope, the cooldown gate or the
// breakers. It evicts state whose key has been idle for the idle timeout,
// when that state has nothing left to remember (a full bucket, a pause
// that is over, a closed breaker), so memory stays bounded however many
// distinct keys come and go. Entries in use are counted and never evicted.
//
// Idleness is kept in epochs of half the idle timeout rather than in
// timestamps, so that a lookup never reads the clock. An entry is evicted
// once it has not been looked up for two whole epochs: after between 1 and
// 1.5 idle timeouts. The epoch moves only
// when a sweep is due, so an entry may look older than it is; evicting it
// early loses nothing, since only forgettable state is evicted.
type keyed[S any] struct {
	shards      [keyedShards]keyedShard[S]
	seed        maphash.Seed
	idle        time.Duration
	init        func(*S)                 // prepares a new key's state; nil leaves it zero
	forgettable func(*S, time.Time) bool // whether evicting the state loses nothing; nil means always
	size        atomic.Int64             // keys held, so a lookup in an empty map takes no lock
	lookups     atomic.Uint64            // lookups of known keys, to pace looks at the clock
	epoch       atomic.Int64             // Unix time in epochs (idle/2) at the last sweep
}

type keyedShard[S any] struct {
	mu sync.Mutex
	m  map[string]*keyedEntry[S] // guarded by mu
}

// keyedEntry is one key's state, with the bookkeeping eviction needs.
type keyedEntry[S any] struct {
	state     S
	refs      atomic.Int32 // holders; raised under the shard's lock
	lastEpoch atomic.Int64 // the keyed epoch when last looked up
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
func (k *keyed[S]) acquire(key string, create bool) *keyedEntry[S] {
	if !create && k.size.Load() == 0 {
		return nil
	}
	sh := k.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	created := e == nil
	if created {
		if !create {
			sh.mu.Unlock()
			return nil
		}
		e = new(keyedEntry[S])
		if k.init != nil {
			k.init(&e.state)
		}
		sh.m[key] = e
		k.size.Add(1)
	}
	e.refs.Add(1)
	sh.mu.Unlock()
	e.lastEpoch.Store(k.epoch.Load())
	if created || k.lookups.Add(1)%sweepCheckEvery == 0 {
		k.maybeSweep(time.Now())
	}
	return e
}

// release ends a hold taken by acquire.
func (k *keyed[S]) release(e *keyedEntry[S]) {
	e.refs.Add(-1)
}

// maybeSweep moves the epoch and evicts idle state when an epoch has
// passed since the last sweep; the caller that wins the race sweeps, one
// shard lock at a time.
func (k *keyed[S]) maybeSweep(now time.Time) {
	epoch := now.UnixNano() / int64(max(k.idle/2, 1))
	last := k.epoch.Load()
	if epoch <= last || !k.epoch.CompareAndSwap(last, epoch) {
		return
	}
	k.sweep(now, epoch-2)
}

// sweep evicts every entry not held, last looked up before epoch staleBy,
// and forgettable.
func (k *keyed[S]) sweep(now time.Time, staleBy int64) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.refs.Load() == 0 && e.lastEpoch.Load() < staleBy &&
				(k.forgettable == nil || k.forgettable(&e.state, now)) {
				delete(sh.m, key)
				k.size.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// len returns the number of keys held.
func (k *keyed[S]) len() int { return int(k.size.Load()) }
