package ratewise

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultIdleTimeout is how long per-key state (a limiter's bucket, a
// cooldown, a breaker) is kept at least after its key was last used, when
// the policy does not say otherwise. It is evicted later, when requests
// for other keys come, and only when it has nothing left to remember.
const DefaultIdleTimeout = 10 * time.Minute

const (
	// keyedShards spreads keys over this many locks, so that requests for
	// different keys seldom wait on each other.
	keyedShards = 64
	// sweepCheckEvery is how many lookups of keys not held pass between
	// two looks at the clock to see whether a sweep is due; a new key
	// always looks. Reading the clock on every request would cost more
	// than the lookup itself.
	sweepCheckEvery = 1024
)

// keyed holds per-key state for one limit scope, the cooldown gate or the
// breakers. It evicts state whose key has gone idle, when that state has
// nothing left to remember (a full bucket, a pause that is over, a closed
// breaker that saw no failure), so memory stays bounded however many
// distinct keys come and go. Entries in use are counted and never evicted.
//
// Idleness is counted in sweeps rather than timestamps, so that a lookup
// never reads the clock. Sweeps run at least half an idle timeout apart,
// when new keys come (and lookups of keys not held); an entry missed by
// three of them has been idle for at least the idle timeout. A map that
// gets no new key does not grow, and needs no sweep.
type keyed[S any] struct {
	shards      [keyedShards]keyedShard[S]
	seed        maphash.Seed
	idle        time.Duration
	init        func(*S)                 // prepares a new key's state; nil leaves it zero
	forgettable func(*S, time.Time) bool // whether evicting the state loses nothing; nil means always
	size        atomic.Int64             // keys held, so a lookup in an empty map takes no lock
	nextSweep   atomic.Int64             // Unix nanoseconds
	// hot is the entry last looked up, found again without a hash or a
	// lock: most transports call one API, most of the time.
	hot atomic.Pointer[keyedEntry[S]]
}

// keyedShard is a part of the map, with its own lock.
type keyedShard[S any] struct {
	mu sync.Mutex
	m  map[string]*keyedEntry[S] // guarded by mu
	// misses counts the shard's lookups of keys it does not hold, to pace
	// looks at the clock: a count per shard costs no add that every core
	// shares, and lookups of keys held need none (see acquire).
	misses atomic.Uint64
}

// keyedEntry is one key's state, with the bookkeeping eviction needs.
type keyedEntry[S any] struct {
	refs   atomic.Int32 // holders; raised under the shard's lock
	missed atomic.Int32 // sweeps since the last lookup
	// The holds change with every request; the state's fast paths read it
	// with every request: a cache line apart, a core raising a hold does
	// not take the state's line from the others.
	_   [cacheLine - 8]byte
	key string
	// gone is set by a sweep that evicts the entry: a lookup through hot
	// that holds it then lets it go. The sweep sets it before it reads the
	// holds, and the lookup raises its hold before it reads gone, so one
	// of them always sees the other.
	gone  atomic.Bool
	state S
}

// cacheLine is the size of a cache line on the machines this runs on.
const cacheLine = 64

// sweepsToEvict is how many sweeps in a row must miss an entry.
const sweepsToEvict = 3

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
	if e := k.hot.Load(); e != nil && e.key == key {
		e.refs.Add(1)
		if !e.gone.Load() {
			if e.missed.Load() != 0 {
				e.missed.Store(0)
			}
			return e
		}
		e.refs.Add(-1) // evicted meanwhile: look it up
	}
	sh := k.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e != nil {
		e.refs.Add(1) // a sweep evicts only entries not held
	}
	sh.mu.Unlock()
	created := false
	if e == nil {
		if !create {
			// Keys that keep no state (an adaptive scope's that learned
			// nothing) drive the sweeps too.
			if sh.misses.Add(1)%sweepCheckEvery == 0 {
				k.maybeSweep(time.Now())
			}
			return nil
		}
		e, created = k.create(sh, key)
	}
	if e.missed.Load() != 0 {
		e.missed.Store(0)
	}
	if k.hot.Load() != e {
		k.hot.Store(e)
	}
	// Only a new key can grow the map: it is when a sweep is looked for.
	// A lookup of a key held counts nothing, so that the requests of one
	// busy key from every core share no write but the entry's hold.
	if created {
		k.maybeSweep(time.Now())
	}
	return e
}

// create adds key's entry to sh, held, unless another caller added it
// meanwhile: then it holds that one. created reports which.
func (k *keyed[S]) create(sh *keyedShard[S], key string) (e *keyedEntry[S], created bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e = sh.m[key]; e == nil {
		e, created = &keyedEntry[S]{key: key}, true
		if k.init != nil {
			k.init(&e.state)
		}
		sh.m[key] = e
		k.size.Add(1)
	}
	e.refs.Add(1)
	return e, created
}

// peek is acquire(key, false) for a look that is not a use: it does not
// count as the key's activity, so that watching a key (a status, a
// scrape) does not keep its state from being evicted.
func (k *keyed[S]) peek(key string) *keyedEntry[S] {
	if k.size.Load() == 0 {
		return nil
	}
	sh := k.shard(key)
	sh.mu.Lock()
	e := sh.m[key]
	if e != nil {
		e.refs.Add(1)
	}
	sh.mu.Unlock()
	return e
}

// release ends a hold taken by acquire or peek.
func (k *keyed[S]) release(e *keyedEntry[S]) {
	e.refs.Add(-1)
}

// maybeSweep sweeps when half an idle timeout has passed since the last
// sweep; the caller that wins the race sweeps, one shard lock at a time.
func (k *keyed[S]) maybeSweep(now time.Time) {
	next := k.nextSweep.Load()
	if now.UnixNano() < next || !k.nextSweep.CompareAndSwap(next, now.Add(k.idle/2).UnixNano()) {
		return
	}
	k.sweep(now)
}

// sweep counts one more miss for every entry not held, and evicts those
// missed sweepsToEvict times in a row that are forgettable.
func (k *keyed[S]) sweep(now time.Time) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.refs.Load() != 0 || e.missed.Add(1) < sweepsToEvict ||
				k.forgettable != nil && !k.forgettable(&e.state, now) {
				continue
			}
			e.gone.Store(true) // before the holds are read again: see gone
			if e.refs.Load() != 0 {
				e.gone.Store(false) // held through hot meanwhile
				continue
			}
			delete(sh.m, key)
			k.size.Add(-1)
		}
		sh.mu.Unlock()
	}
}

// each calls f with every key's state, one shard's lock held at a time.
func (k *keyed[S]) each(f func(*S)) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for _, e := range sh.m {
			f(&e.state)
		}
		sh.mu.Unlock()
	}
}

// keys returns the keys held, in no order.
func (k *keyed[S]) keys() []string {
	out := make([]string, 0, k.len())
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key := range sh.m {
			out = append(out, key)
		}
		sh.mu.Unlock()
	}
	return out
}

// len returns the number of keys held.
func (k *keyed[S]) len() int { return int(k.size.Load()) }
