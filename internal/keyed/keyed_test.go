package keyed

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const idle = 10 * time.Minute

// touch acquires key, creating it, and releases it at once: one use.
func touch[S any](m *Map[S], key string) {
	m.Release(m.Acquire(key, true))
}

// has reports whether m holds key, without counting as its use.
func has[S any](m *Map[S], key string) bool {
	e := m.Peek(key)
	if e == nil {
		return false
	}
	m.Release(e)
	return true
}

func TestAcquireCreatesOnce(t *testing.T) {
	inits := 0
	m := New(idle, func(st *int) { inits++; *st = 7 }, nil)
	if e := m.Acquire("a", false); e != nil {
		t.Fatalf("Acquire(a, false) on an empty map = %v, want nil", e)
	}
	e := m.Acquire("a", true)
	if e.State != 7 || inits != 1 {
		t.Fatalf("a new entry's State = %d after %d inits, want 7 after 1", e.State, inits)
	}
	e.State = 8
	again := m.Acquire("a", true)
	if again != e || inits != 1 {
		t.Errorf("Acquire(a, true) again = a new entry (%d inits), want the one made first", inits)
	}
	if got := m.Acquire("a", false); got != e {
		t.Errorf("Acquire(a, false) = %p, want the entry made first %p", got, e)
	}
	if got := e.Holds(); got != 3 {
		t.Errorf("Holds() after three Acquires = %d, want 3", got)
	}
	m.Hold(e)
	for range 4 {
		m.Release(e)
	}
	if got := e.Holds(); got != 0 {
		t.Errorf("Holds() after as many Releases as holds = %d, want 0", got)
	}
	if e.State != 8 {
		t.Errorf("State = %d, want the 8 set through the first hold", e.State)
	}
	if m.Len() != 1 {
		t.Errorf("Len() = %d, want 1", m.Len())
	}
}

func TestNilInitLeavesStateZero(t *testing.T) {
	m := New[int](idle, nil, nil)
	e := m.Acquire("a", true)
	defer m.Release(e)
	if e.State != 0 {
		t.Errorf("State = %d with a nil init, want 0", e.State)
	}
}

func TestKeysEachLen(t *testing.T) {
	m := New[int](idle, nil, nil)
	want := []string{"a", "b", "c", "d"}
	for i, k := range want {
		e := m.Acquire(k, true)
		e.State = i
		m.Release(e)
	}
	keys := m.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Errorf("Keys() = %q, want %q", keys, want)
	}
	if m.Len() != len(want) {
		t.Errorf("Len() = %d, want %d", m.Len(), len(want))
	}
	seen := map[string]int{}
	m.Each(func(key string, e *Entry[int]) { seen[key] = e.State })
	for i, k := range want {
		if got, ok := seen[k]; !ok || got != i {
			t.Errorf("Each gave %q state %d (seen %v), want %d", k, got, ok, i)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("Each visited %d keys, want %d", len(seen), len(want))
	}
}

func TestIdleAndHash(t *testing.T) {
	m := New[int](3*time.Minute, nil, nil)
	if m.Idle() != 3*time.Minute {
		t.Errorf("Idle() = %v, want 3m0s", m.Idle())
	}
	first := m.Hash("a")
	touch(m, "a")
	if got := m.Hash("a"); got != first {
		t.Errorf("Hash(a) = %#x, then %#x: want the same", first, got)
	}
	if m.Hash("a") == m.Hash("b") {
		t.Error("Hash(a) = Hash(b), want them apart")
	}
}

// TestEvictedAfterThreeSweeps: sweeps come with new keys, half an idle
// timeout apart at least; the third that misses an entry evicts it, so a
// key outlives its last use by the idle timeout at least.
func TestEvictedAfterThreeSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New[int](idle, nil, nil)
		touch(m, "a") // the first sweep, at once: a is held through it
		for i, want := range []bool{true, true, false} {
			time.Sleep(idle / 2)
			touch(m, "new-"+strconv.Itoa(i)) // a sweep
			if got := has(m, "a"); got != want {
				t.Errorf("after %v idle: holds a = %v, want %v", time.Duration(i+1)*idle/2, got, want)
			}
		}
		if m.Len() != 3 {
			t.Errorf("Len() = %d, want the 3 keys used since", m.Len())
		}
	})
}

// TestSweepsAreHalfAnIdleTimeoutApart: new keys coming sooner bring no
// sweep, so a key is not evicted before its idle timeout however many new
// keys come.
func TestSweepsAreHalfAnIdleTimeoutApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New[int](idle, nil, nil)
		touch(m, "a")
		for i := range 1000 {
			time.Sleep(idle / 1000)
			touch(m, "new-"+strconv.Itoa(i))
			if elapsed := time.Duration(i+1) * idle / 1000; elapsed < idle && !has(m, "a") {
				t.Fatalf("a evicted after %v idle, want it kept for %v", elapsed, idle)
			}
		}
		time.Sleep(idle / 2)
		touch(m, "last")
		if has(m, "a") {
			t.Errorf("a still held after %v idle, want it evicted", idle*3/2)
		}
	})
}

// TestUseKeepsAndPeekDoesNot: an Acquire starts the key's idle time
// again; a Peek, a look at it, does not.
func TestUseKeepsAndPeekDoesNot(t *testing.T) {
	tests := []struct {
		name     string
		look     func(m *Map[int], key string)
		wantKept bool
	}{
		{name: "Acquire", look: func(m *Map[int], key string) {
			if e := m.Acquire(key, false); e != nil {
				m.Release(e)
			}
		}, wantKept: true},
		{name: "Peek", look: func(m *Map[int], key string) {
			if e := m.Peek(key); e != nil {
				m.Release(e)
			}
		}, wantKept: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := New[int](idle, nil, nil)
				touch(m, "a")
				for i := range 3 {
					time.Sleep(idle / 2)
					tt.look(m, "a")
					touch(m, "new-"+strconv.Itoa(i))
				}
				if got := has(m, "a"); got != tt.wantKept {
					t.Errorf("a looked at by %s before each sweep: kept = %v, want %v", tt.name, got, tt.wantKept)
				}
			})
		})
	}
}

func TestHeldEntryNeverEvicted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New[int](idle, nil, nil)
		e := m.Acquire("a", true)
		for i := range 10 {
			time.Sleep(idle / 2)
			touch(m, "new-"+strconv.Itoa(i))
		}
		if got := m.Acquire("a", false); got != e {
			t.Fatalf("Acquire(a, false) after 10 sweeps held = %p, want the entry held %p", got, e)
		}
		m.Release(e)
		m.Release(e)
	})
}

// TestForgettableKeepsState: a state that would lose something when
// evicted is kept past its idle timeout, and goes at the first sweep
// after it has nothing left to remember.
func TestForgettableKeepsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var until time.Time // a's state, 1, is worth keeping until then
		asked := 0
		m := New(idle, nil, func(st *int, now time.Time) bool {
			if *st == 0 {
				return true
			}
			asked++
			return !now.Before(until)
		})
		until = time.Now().Add(4 * idle)
		e := m.Acquire("a", true)
		e.State = 1
		m.Release(e)
		sweep := 0
		for has(m, "a") && sweep < 20 {
			time.Sleep(idle / 2)
			sweep++
			touch(m, "new-"+strconv.Itoa(sweep))
		}
		// Sweeps at idle/2 steps: missed 3 times at 3*idle/2, then asked
		// at every sweep until 4*idle, the eighth.
		if sweep != 8 {
			t.Errorf("a evicted at sweep %d (%v), want sweep 8 (4*idle)", sweep, time.Duration(sweep)*idle/2)
		}
		if asked != 6 {
			t.Errorf("forgettable asked of a %d times, want 6: at every sweep from its third miss on", asked)
		}
	})
}

// TestMissesDriveSweeps: lookups of keys the map does not hold bring a
// sweep every SweepCheckEvery of them in a shard, so a map that gets no
// new key still evicts; the entry last looked up, found again without a
// lock, is not handed out once evicted.
func TestMissesDriveSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inits := 0
		m := New(idle, func(*int) { inits++ }, nil)
		b := m.Acquire("b", true) // held throughout: the map is never empty
		defer m.Release(b)
		touch(m, "a") // the entry last looked up from now on
		for range 3 {
			time.Sleep(idle / 2)
			for range SweepCheckEvery {
				if m.Acquire("absent", false) != nil {
					t.Fatal("Acquire(absent, false) found an entry, want none")
				}
			}
		}
		if m.Len() != 1 {
			t.Fatalf("Len() = %d after three sweeps driven by misses, want 1 (b, held)", m.Len())
		}
		if e := m.Acquire("a", false); e != nil {
			t.Fatal("Acquire(a, false) returned the evicted entry, want nil")
		}
		e := m.Acquire("a", true)
		defer m.Release(e)
		if inits != 3 || m.Len() != 2 {
			t.Errorf("Acquire(a, true) after eviction: %d inits, Len() = %d; want a new entry (3 inits, Len 2)", inits, m.Len())
		}
	})
}

// TestConcurrentUseAndSweeps: however lookups and sweeps interleave, an
// entry held stays the key's entry until its last hold ends.
func TestConcurrentUseAndSweeps(t *testing.T) {
	m := New[atomic.Int64](idle, nil, nil)
	keys := []string{"a", "b", "c"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		now := time.Now()
		for {
			select {
			case <-stop:
				return
			default:
			}
			now = now.Add(idle)
			m.sweep(now)
		}
	})
	var users sync.WaitGroup
	for g := range 8 {
		users.Go(func() {
			for i := range 2000 {
				key := keys[(g+i)%len(keys)]
				e := m.Acquire(key, true)
				e.State.Add(1)
				if got := m.Acquire(key, false); got != e {
					t.Errorf("Acquire(%s, false) while held = %p, want the entry held %p", key, got, e)
				}
				if got := m.Peek(key); got != e {
					t.Errorf("Peek(%s) while held = %p, want the entry held %p", key, got, e)
				}
				m.Release(e)
				m.Release(e)
				m.Release(e)
			}
		})
	}
	users.Wait()
	close(stop)
	wg.Wait()
	m.Each(func(key string, e *Entry[atomic.Int64]) {
		if e.Holds() != 0 {
			t.Errorf("%s still held %d times, want 0", key, e.Holds())
		}
	})
}
