package ratewise

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// Two transports given one store by WithStore alone share a told limit's
// bucket, the pause gate's pauses and the breaker's trips, as each
// policy's own Store field would.
func TestWithStoreSharesLimitPauseAndBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		rec := &recording{base: newScript(answer(200)).mock()}
		replica := func() *Transport {
			return New(rec, WithStore(mem), WithLimit(Limit{Name: "api", Rate: 10, Burst: 1}),
				WithBreaker(BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, FailFast: true}))
		}
		a, b := replica(), replica()
		for i := range 10 {
			tr := []*Transport{a, b}[i%2]
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i < len(rec.times); i++ {
			if gap := rec.times[i].Sub(rec.times[i-1]); gap < 100*time.Millisecond {
				t.Fatalf("requests %d and %d %v apart: the replicas went over the shared 10/s", i-1, i, gap)
			}
		}

		// A 429 with a hint that one replica sees pauses the other.
		refused := New(newScript(answer(429, "Retry-After", "3")).mock(), WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}))
		start := time.Now()
		if status, _ := callOnce(t, refused, context.Background()); status != 429 {
			t.Fatalf("the refused replica got %d", status)
		}
		if _, err := callOnce(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		if sent := rec.times[len(rec.times)-1].Sub(start); sent < 3*time.Second {
			t.Errorf("b sent %v after another replica's 429 with Retry-After 3, want it held 3s", sent)
		}

		// Two failures in a row on one replica open the breaker for both.
		failing := New(newScript(answer(503)).mock(), WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, FailFast: true}))
		_, _ = callOnce(t, failing, context.Background())
		_, _ = callOnce(t, failing, context.Background())
		var open *CircuitOpenError
		if _, err := callOnce(t, a, context.Background()); !errors.As(err, &open) {
			t.Errorf("a after another replica's trip: err = %v, want the shared breaker open", err)
		}
	})
}

// A Store a policy names wins over WithStore's, in whichever order the
// options come; WithStore adds no breaker, and leaves a window, a spacing
// and the learned pace each transport's own.
func TestWithStoreYieldsToAPolicysOwnStore(t *testing.T) {
	mine, fleet := NewMemoryStore(), NewMemoryStore()
	tr := New(nil, WithLimit(Limit{Name: "own", Rate: 5, Burst: 2, Store: mine}), WithStore(fleet),
		WithPause(PausePolicy{Store: mine}), WithLimit(Limit{Name: "shared", Rate: 5, Burst: 2}),
		WithLimit(Limit{Name: "window", Burst: 3, Window: time.Second}),
		WithLimit(Limit{Name: "spacing", MinSpacing: time.Second}))
	if err := tr.err; err != nil {
		t.Fatal(err)
	}
	stores := map[string]store.Buckets{}
	for _, s := range tr.scopes() {
		stores[s.Name()] = s.limit().Store
	}
	if stores["own"] != store.Buckets(mine) || stores["shared"] != store.Buckets(fleet) {
		t.Errorf("stores: own %p, shared %p; want the Limit's own (%p) and WithStore's (%p)", stores["own"], stores["shared"], mine, fleet)
	}
	for _, name := range []string{"window", "spacing", LearnedScope} {
		if stores[name] != nil {
			t.Errorf("scope %q took a mem, want its state kept by the transport", name)
		}
	}
	if tr.gate.Store() != store.Pauses(mine) {
		t.Errorf("the gate's mem is %p, want the PausePolicy's own (%p)", tr.gate.Store, mine)
	}
	if _, ok := tr.BreakerPolicy(); ok {
		t.Error("WithStore added a breaker")
	}
}

// AddLimit and SetLimit give WithStore's store to a bucket that names
// none, and SetBreakerPolicy with no Store keeps the breakers' shared one
// rather than refusing to change it.
func TestWithStoreReachesLimitsAddedOrSetLater(t *testing.T) {
	fleet := NewMemoryStore()
	tr := New(nil, WithStore(fleet), WithBreaker(BreakerPolicy{ConsecutiveFailures: 3}))
	if err := tr.AddLimit(Limit{Name: "later", Rate: 5, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if err := tr.SetLimit(Limit{Name: "later", Rate: 2, Burst: 1}); err != nil {
		t.Fatal(err)
	}
	if s := tr.scopeNamed("later"); s.limit().Store != store.Buckets(fleet) || s.limit().Rate != 2 {
		t.Errorf("after AddLimit and SetLimit: %+v, want Rate 2 in WithStore's store", *s.limit())
	}
	if err := tr.SetBreakerPolicy(BreakerPolicy{ConsecutiveFailures: 5}); err != nil {
		t.Errorf("SetBreakerPolicy with no Store on a transport WithStore shares: %v", err)
	}
	if p, _ := tr.BreakerPolicy(); p.Store != store.Breakers(fleet) || p.ConsecutiveFailures != 5 {
		t.Errorf("breaker policy %+v, want 5 failures, in WithStore's store", p)
	}
}

// countingStore counts the calls made to a MemoryStore, by method.
type countingStore struct {
	*MemoryStore
	mu    sync.Mutex
	calls map[string]int
}

func newCountingStore() *countingStore {
	return &countingStore{MemoryStore: NewMemoryStore(), calls: map[string]int{}}
}

func (s *countingStore) count(method string) {
	s.mu.Lock()
	s.calls[method]++
	s.mu.Unlock()
}

func (s *countingStore) counted() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls)
}

func (s *countingStore) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	s.count("Take")
	return s.MemoryStore.Take(ctx, key, n, r, burst, maxWait)
}

func (s *countingStore) PausedUntil(ctx context.Context, key string) (time.Time, error) {
	s.count("PausedUntil")
	return s.MemoryStore.PausedUntil(ctx, key)
}

func (s *countingStore) BreakerAdmit(ctx context.Context, key string, rules *store.Rules) (store.Breaker, error) {
	s.count("BreakerAdmit")
	return s.MemoryStore.BreakerAdmit(ctx, key, rules)
}

func (s *countingStore) BreakerSucceeded(ctx context.Context, key string, probe bool, rules *store.Rules) error {
	s.count("BreakerSucceeded")
	return s.MemoryStore.BreakerSucceeded(ctx, key, probe, rules)
}

func (s *countingStore) Admit(ctx context.Context, ask *store.AdmitAsk) (store.AdmitAnswer, error) {
	s.count("Admit")
	return s.MemoryStore.Admit(ctx, ask)
}

// plainStore hides a store's Admit: its questions are asked one by one.
type plainStore struct{ store.Store }

// With WithStore's store a store.Admitter, a call that needs no help asks
// it once before it is sent, for its breaker, its pause and its told
// bucket together, and tells its success with the next call's asking,
// where a store that cannot combine is asked three times, and told each
// success; the answers are the same.
func TestWithStoreAsksOnceBeforeSending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, combine := range []bool{true, false} {
			counting := newCountingStore()
			var s store.Store = counting
			if !combine {
				s = plainStore{counting}
			}
			rec := &recording{base: newScript(answer(200)).mock()}
			tr := New(rec, WithStore(s), WithLimit(Limit{Name: "api", Rate: 20, Burst: 1}),
				WithBreaker(BreakerPolicy{ConsecutiveFailures: 3}))
			start := time.Now()
			for range 5 {
				if _, err := callOnce(t, tr, context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			got := counting.counted()
			want := map[string]int{"Admit": 5, "Take": 4}
			if !combine {
				want = map[string]int{"BreakerAdmit": 5, "PausedUntil": 5, "Take": 5, "BreakerSucceeded": 5}
			}
			if !maps.Equal(got, want) {
				t.Errorf("combine %v: the mem was asked %v, want %v", combine, got, want)
			}
			// The first token was there; each next one 50ms later, which
			// the Admit's take-if-there-now left to a Take that waits.
			if at := rec.times[4].Sub(start); at != 200*time.Millisecond {
				t.Errorf("combine %v: the fifth request went at %v, want 200ms: one bucket of 20/s", combine, at)
			}
		}
	})
}

// A half-open breaker's probe granted by Admit is the probe: its success
// closes the shared breaker for every transport.
func TestWithStoreProbeGrantedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, FailFast: true}
		failing := New(newScript(answer(503)).mock(), WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(policy))
		ok := New(newScript(answer(200)).mock(), WithStore(mem), WithBreaker(policy))
		_, _ = callOnce(t, failing, context.Background()) // trips the shared breaker
		var open *CircuitOpenError
		if _, err := callOnce(t, ok, context.Background()); !errors.As(err, &open) {
			t.Fatalf("during the cooldown: %v, want the shared breaker open", err)
		}
		time.Sleep(time.Second)
		if status, err := callOnce(t, ok, context.Background()); err != nil || status != 200 {
			t.Fatalf("the probe: %d, %v", status, err)
		}
		rules := policy.Rules()
		if sb, _ := mem.BreakerRead(context.Background(), host, &rules); sb.State != store.Closed {
			t.Errorf("after the probe's success the shared breaker is %v, want closed", sb.State)
		}
	})
}
