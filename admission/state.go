package admission

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// This file keeps a scope's state per key: a token bucket as a GCRA
// (one atomic word, its theoretical arrival time), or a fixed window (a
// start and a count under a mutex), in a sharded map whose idle keys are
// dropped as new ones come.
//
// The buckets are GCRA in integer nanoseconds rather than
// golang.org/x/time/rate's float tokens: taking, reserving and giving
// back a token are one compare-and-swap, with no lock for the global
// scope every request passes, the counts the headers publish are exact,
// and the scope's own buckets behave as the ratewise/redis store's,
// which is a GCRA too.

// entry is one key's state in a scope. Times are nanoseconds since the
// Handler's epoch.
type entry struct {
	// tat is a bucket's theoretical arrival time: the bucket is full at
	// tat and after, and holds (tau − (tat − now)) / interval tokens
	// before it.
	tat atomic.Int64
	// users counts the requests holding the entry; a held entry is never
	// dropped from its map. waiting counts those queued for a turn.
	users, waiting atomic.Int32

	mu sync.Mutex
	// A window's turns: n turns counted from start, in consecutive
	// windows, limit to a window. Guarded by mu.
	start, n int64
}

// takeBucket takes a token at now, or reserves the one that comes within
// maxWait, and returns the wait until it comes. When it comes later it
// takes nothing and returns that wait, with ok false.
func (e *entry) takeBucket(now, interval, tau, maxWait int64) (wait int64, ok bool) {
	for {
		tat := e.tat.Load()
		next := max(tat, now) + interval
		wait = next - tau - now
		if wait > maxWait {
			return wait, false
		}
		if e.tat.CompareAndSwap(tat, next) {
			return max(wait, 0), true
		}
	}
}

// peekBucket is the wait takeBucket would return at now, taking nothing.
func (e *entry) peekBucket(now, interval, tau int64) int64 {
	return max(max(e.tat.Load(), now)+interval-tau-now, 0)
}

// giveBackBucket gives back a token takeBucket took: the next taker has
// it. A bucket full again needs no more.
func (e *entry) giveBackBucket(interval int64) { e.tat.Add(-interval) }

// bucketView is what the bucket holds at now: the whole tokens, and the
// time until it is full again.
func (e *entry) bucketView(now, interval, tau int64) view {
	ahead := max(e.tat.Load()-now, 0)
	return view{remaining: max((tau-ahead)/interval, 0), reset: ahead, ok: true}
}

// takeWindow takes a turn in the current window at now, or reserves the
// first turn of a later window that starts within maxWait, and returns
// the wait and the turn's place. Windows follow each other while turns
// are taken: the first starts at the first turn, and once every counted
// window is over the next turn starts a new one.
func (e *entry) takeWindow(now, window, limit, maxWait int64) (wait, slot int64, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 || now >= e.start+ceilDiv(e.n, limit)*window {
		e.start, e.n = now, 0
	}
	wait = max(e.start+(e.n/limit)*window-now, 0)
	if wait > maxWait {
		return wait, 0, false
	}
	slot = e.n
	e.n++
	return wait, slot, true
}

// peekWindow is the wait takeWindow would return at now, taking nothing.
func (e *entry) peekWindow(now, window, limit int64) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 || now >= e.start+ceilDiv(e.n, limit)*window {
		return 0
	}
	return max(e.start+(e.n/limit)*window-now, 0)
}

// giveBackWindow gives back the turn at slot when it is the last taken;
// with others taken behind it, its place stays taken (the window admits
// one fewer, never more).
func (e *entry) giveBackWindow(slot int64) {
	e.mu.Lock()
	if e.n == slot+1 {
		e.n--
	}
	e.mu.Unlock()
}

// windowView is what the window at now has left, and the time until it
// ends; a window not started yet is whole, and would last a window.
func (e *entry) windowView(now, window, limit int64) view {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 || now < e.start || now >= e.start+ceilDiv(e.n, limit)*window {
		return view{remaining: limit, reset: window, ok: true}
	}
	current := (now - e.start) / window
	used := min(max(e.n-current*limit, 0), limit)
	return view{remaining: limit - used, reset: e.start + (current+1)*window - now, ok: true}
}

// idle reports whether the entry holds nothing worth keeping at now: a
// full bucket, every window over, no request holding it.
func (e *entry) idle(now, window, limit int64) bool {
	if e.users.Load() != 0 || e.tat.Load() > now {
		return false
	}
	if window == 0 {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n == 0 || now >= e.start+ceilDiv(e.n, limit)*window
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// shardCount is how many locks a scope's keys are spread over.
const shardCount = 64

// keyMap is a scope's entries by key, in shards. A lookup takes a
// shard's read lock; a key seen for the first time its write lock, and,
// once the shard has doubled since it last did, drops the idle entries.
type keyMap struct {
	seed   maphash.Seed
	shards [shardCount]keyShard
}

type keyShard struct {
	mu     sync.RWMutex
	m      map[string]*entry // guarded by mu
	pruned int               // len(m) after the last prune; guarded by mu
	_      [24]byte          // a shard to a cache line
}

// minPrune is the least size at which a shard drops idle entries.
const minPrune = 64

func newKeyMap() *keyMap { return &keyMap{seed: maphash.MakeSeed()} }

// acquire returns key's entry, made on first use, held until release.
func (km *keyMap) acquire(key string, now int64, s *scope) *entry {
	sh := &km.shards[maphash.String(km.seed, key)%shardCount]
	sh.mu.RLock()
	e := sh.m[key]
	if e != nil {
		e.users.Add(1)
	}
	sh.mu.RUnlock()
	if e != nil {
		return e
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e = sh.m[key]; e == nil {
		if sh.m == nil {
			sh.m = make(map[string]*entry)
		}
		if len(sh.m) >= 2*max(sh.pruned, minPrune) {
			for k, old := range sh.m {
				if old.idle(now, s.window, s.limit) {
					delete(sh.m, k)
				}
			}
			sh.pruned = len(sh.m)
		}
		e = &entry{}
		// The key may be part of a larger string (a header): keep only
		// its own bytes.
		sh.m[strings.Clone(key)] = e
	}
	e.users.Add(1)
	return e
}

// lookup returns key's entry without holding it, or nil: for statuses.
func (km *keyMap) lookup(key string) *entry {
	sh := &km.shards[maphash.String(km.seed, key)%shardCount]
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	return sh.m[key]
}

// release lets an entry acquire returned go.
func release(e *entry) { e.users.Add(-1) }

// len counts the entries, for tests.
func (km *keyMap) len() int {
	n := 0
	for i := range km.shards {
		sh := &km.shards[i]
		sh.mu.RLock()
		n += len(sh.m)
		sh.mu.RUnlock()
	}
	return n
}
