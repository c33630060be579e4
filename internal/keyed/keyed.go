// Package keyed holds per-key state that is evicted once its key has gone
// idle: the map behind each limit scope, the pause gate, the breakers
// and the retry budget. It is on the path of every request, so a lookup
// of a busy key takes no lock and reads no clock.
//
// # Sweeps
//
// Map holds per-key state for one limit scope, the pause gate or the
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
//
// Create one with [New]; the zero value is not usable. A Map is safe for
// concurrent use; the state of its entries is guarded by what the caller
// puts in it.
package keyed

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// shardCount spreads keys over this many locks, so that requests for
	// different keys seldom wait on each other.
	shardCount = 64
	// SweepCheckEvery is how many lookups of keys not held pass between
	// two looks at the clock to see whether a sweep is due; a new key
	// always looks. Reading the clock on every request would cost more
	// than the lookup itself.
	SweepCheckEvery = 1024
)

// Map holds per-key state for one limit scope, the pause gate or the
// breakers, and evicts state whose key has gone idle when it has nothing
// left to remember, so memory stays bounded. Entries in use are never
// evicted. Idleness is counted in sweeps, so a lookup never reads the clock
// (see the package doc). Create one with [New]; it is safe for concurrent
// use.
type Map[S any] struct {
	shards      [shardCount]shard[S]
	seed        maphash.Seed
	idle        time.Duration
	init        func(*S)                 // prepares a new key's state; nil leaves it zero
	forgettable func(*S, time.Time) bool // whether evicting the state loses nothing; nil means always
	size        atomic.Int64             // keys held, so a lookup in an empty map takes no lock
	nextSweep   atomic.Int64             // Unix nanoseconds
	// hot is the entry last looked up, found again without a hash or a
	// lock: most transports call one API, most of the time.
	hot atomic.Pointer[Entry[S]]
}

// shard is a part of the map, with its own lock.
type shard[S any] struct {
	mu sync.Mutex
	m  map[string]*Entry[S] // guarded by mu
	// misses counts the shard's lookups of keys it does not hold, to pace
	// looks at the clock: a count per shard costs no add that every core
	// shares, and lookups of keys held need none (see Acquire).
	misses atomic.Uint64
}

// Entry is one key's state, with the bookkeeping eviction needs. It is
// reached through [Map.Acquire] or [Map.Peek], and stays in the map while
// held, until [Map.Release].
type Entry[S any] struct {
	refs   atomic.Int32 // holders; raised under the shard's lock
	missed atomic.Int32 // sweeps since the last lookup
	// The holds change with every request; the state's fast paths read it
	// with every request: a cache line apart, a core raising a hold does
	// not take the state's line from the others.
	_   [cacheLine - 8]byte
	key string
	// hash is key's hash under the Map's seed (Hash), kept so that the
	// hot key's is had without hashing.
	hash uint64
	// gone is set by a sweep that evicts the entry: a lookup through hot
	// that holds it then lets it go. The sweep sets it before it reads the
	// holds, and the lookup raises its hold before it reads gone, so one
	// of them always sees the other.
	gone atomic.Bool
	// State is the key's state, made by the Map's init when the key was
	// first acquired. The Map never touches it but to hand it to init and
	// forgettable.
	State S
}

// cacheLine is the size of a cache line on the machines this runs on.
const cacheLine = 64

// sweepsToEvict is how many sweeps in a row must miss an entry.
const sweepsToEvict = 3

// New returns an empty Map whose entries are kept at least idle after
// their key's last use; idle must be positive. init, if not nil, prepares
// a new key's state. forgettable, if not nil, reports whether evicting a
// state idle that long loses nothing at the given time; a nil forgettable
// lets every idle entry go.
func New[S any](idle time.Duration, init func(*S), forgettable func(*S, time.Time) bool) *Map[S] {
	k := &Map[S]{seed: maphash.MakeSeed(), idle: idle, init: init, forgettable: forgettable}
	for i := range k.shards {
		k.shards[i].m = make(map[string]*Entry[S])
	}
	return k
}

func (k *Map[S]) shard(key string) *shard[S] {
	return &k.shards[maphash.String(k.seed, key)%shardCount]
}

// Hash returns key's hash under the map's seed: the same key gives the
// same hash for the map's life. The hot key's (the last looked up) is
// had without hashing, evicted since or not: it is the same hash.
func (k *Map[S]) Hash(key string) uint64 {
	if e := k.hot.Load(); e != nil && e.key == key {
		return e.hash
	}
	return maphash.String(k.seed, key)
}

// Idle returns how long at least an idle entry is kept, as given to [New].
func (k *Map[S]) Idle() time.Duration { return k.idle }

// Acquire returns key's entry, creating it when create is set (else nil
// when the key has none), and holds it until [Map.Release]. It counts as
// the key's use: an entry acquired since the last sweeps is not evicted.
func (k *Map[S]) Acquire(key string, create bool) *Entry[S] {
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
	h := maphash.String(k.seed, key)
	sh := &k.shards[h%shardCount]
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
			if sh.misses.Add(1)%SweepCheckEvery == 0 {
				k.maybeSweep(time.Now())
			}
			return nil
		}
		e, created = k.create(sh, key, h)
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

// create adds key's entry, of hash h, to sh, held, unless another caller
// added it meanwhile: then it holds that one. created reports which.
func (k *Map[S]) create(sh *shard[S], key string, h uint64) (e *Entry[S], created bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e = sh.m[key]; e == nil {
		e, created = &Entry[S]{key: key, hash: h}, true
		if k.init != nil {
			k.init(&e.State)
		}
		sh.m[key] = e
		k.size.Add(1)
	}
	e.refs.Add(1)
	return e, created
}

// Peek is Acquire(key, false) for a look that is not a use: it does not
// count as the key's activity, so that watching a key (a status, a
// scrape) does not keep its state from being evicted.
func (k *Map[S]) Peek(key string) *Entry[S] {
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

// Hold takes one more hold on e, which the caller holds already (from
// [Map.Acquire] or [Map.Peek]): each hold ends with its own
// [Map.Release].
func (k *Map[S]) Hold(e *Entry[S]) {
	e.refs.Add(1)
}

// Release ends a hold taken by [Map.Acquire], [Map.Peek] or [Map.Hold].
func (k *Map[S]) Release(e *Entry[S]) {
	e.refs.Add(-1)
}

// Holds returns how many holds on e have not been released yet.
func (e *Entry[S]) Holds() int { return int(e.refs.Load()) }

// maybeSweep sweeps when half an idle timeout has passed since the last
// sweep; the caller that wins the race sweeps, one shard lock at a time.
func (k *Map[S]) maybeSweep(now time.Time) {
	next := k.nextSweep.Load()
	if now.UnixNano() < next || !k.nextSweep.CompareAndSwap(next, now.Add(k.idle/2).UnixNano()) {
		return
	}
	k.sweep(now)
}

// sweep counts one more miss for every entry not held, and evicts those
// missed sweepsToEvict times in a row that are forgettable.
func (k *Map[S]) sweep(now time.Time) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			if e.refs.Load() != 0 || e.missed.Add(1) < sweepsToEvict ||
				k.forgettable != nil && !k.forgettable(&e.State, now) {
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

// Each calls f with every key and its entry, one shard's lock held at a
// time: f must not look keys up in the Map nor list them. It neither
// holds the entries nor counts as their use.
func (k *Map[S]) Each(f func(key string, e *Entry[S])) {
	for i := range k.shards {
		sh := &k.shards[i]
		sh.mu.Lock()
		for key, e := range sh.m {
			f(key, e)
		}
		sh.mu.Unlock()
	}
}

// Keys returns the keys held, in no order.
func (k *Map[S]) Keys() []string {
	out := make([]string, 0, k.Len())
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

// Len returns the number of keys held.
func (k *Map[S]) Len() int { return int(k.size.Load()) }
