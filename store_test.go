package ratewise

import (
	"context"
	"errors"
	"github.com/ratewise/ratewise/internal/breaker"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

func TestSharedLimitHoldsAcrossTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		rec := &recording{base: newScript(answer(200)).mock()}
		limit := Limit{Name: "api", Rate: 10, Burst: 1, Store: mem}
		a, b := New(rec, WithLimit(limit)), New(rec, WithLimit(limit))
		for i := range 20 {
			tr := a
			if i%2 == 1 {
				tr = b
			}
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for i := 1; i < len(rec.times); i++ {
			if gap := rec.times[i].Sub(rec.times[i-1]); gap < 100*time.Millisecond {
				t.Fatalf("requests %d and %d %v apart: two transports went over the shared 10/s", i-1, i, gap)
			}
		}
	})
}

func TestSharedCooldownPausesEveryTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		refused := newScript(answer(429, "Retry-After", "3"))
		ok := &recording{base: newScript(answer(200)).mock()}
		a := New(refused.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithPause(PausePolicy{Store: mem}))
		b := New(ok, WithPause(PausePolicy{Store: mem, Spread: time.Nanosecond}))
		start := time.Now()
		if status, _ := callOnce(t, a, context.Background()); status != 429 {
			t.Fatalf("a = %d", status)
		}
		if _, err := callOnce(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		if sent := ok.times[0].Sub(start); sent < 3*time.Second {
			t.Errorf("b sent %v after a's 429 with Retry-After 3, want it held 3s", sent)
		}
	})
}

func TestSharedBreakerTripsEveryTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		failing := newScript(answer(503))
		other := newScript(answer(200))
		policy := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, Store: mem}
		a := New(failing.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(policy))
		b := New(other.mock(), WithBreaker(policy))
		_, _ = callOnce(t, a, context.Background())
		// One failure, then b's success clears the count: no trip yet.
		if _, err := callOnce(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		_, _ = callOnce(t, a, context.Background())
		_, _ = callOnce(t, a, context.Background()) // the second failure in a row trips
		_, err := callOnce(t, b, context.Background())
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.State != BreakerOpen {
			t.Fatalf("b after a's trip: err = %v, want the shared breaker open", err)
		}
		if other.calls() != 1 {
			t.Errorf("b sent %d requests, want only the one before the trip", other.calls())
		}
	})
}

func TestSharedBreakerOneProbeAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		slow := newScript(answer(200))
		policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: mem}
		rules := policy.Rules()
		if _, err := mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		// The first request after the cooldown is the probe; while it is out,
		// another transport's request that may not wait is refused,
		// half-open.
		sb, _ := mem.BreakerAdmit(context.Background(), host, &rules)
		if sb.State != store.HalfOpen || !sb.Probe {
			t.Fatalf("first after the cooldown = %+v, want the probe", sb)
		}
		b := New(slow.mock(), WithBreaker(policy))
		_, err := callOnce(t, b, noWait())
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.State != BreakerHalfOpen || slow.calls() != 0 {
			t.Fatalf("during the probe: err = %v, %d sent; want half-open and nothing sent", err, slow.calls())
		}
		// The probe succeeds: the breaker closes for everyone.
		if err := mem.BreakerSucceeded(context.Background(), host, true, &rules); err != nil {
			t.Fatal(err)
		}
		if status, err := callOnce(t, b, context.Background()); status != 200 {
			t.Fatalf("after the probe's success: %d, %v", status, err)
		}
	})
}

// takeCounter counts a store's Take calls.
type takeCounter struct {
	*MemoryStore
	takes atomic.Int64
}

func (c *takeCounter) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	c.takes.Add(1)
	return c.MemoryStore.Take(ctx, key, n, r, burst, maxWait)
}

// Waiters for a shared token each reserve their turn and sleep once,
// rather than all waking at each refill to ask again: N waiters, N asks.
func TestSharedLimitWaitersAskTheStoreOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &takeCounter{MemoryStore: NewMemoryStore()}
		rec := &recording{base: newScript(answer(200)).mock()}
		tr := New(rec, WithLimit(Limit{Name: "api", Rate: 10, Burst: 1, Store: mem}))
		start := time.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if _, err := callOnce(t, tr, context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := mem.takes.Load(); n != 50 {
			t.Errorf("50 admissions asked the mem %d times, want once each", n)
		}
		slices.SortFunc(rec.times, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(rec.times); i++ { // to a µs: the bucket's float arithmetic
			if gap := rec.times[i].Sub(rec.times[i-1]); gap < 100*time.Millisecond-time.Microsecond {
				t.Fatalf("requests %d and %d %v apart, over the shared 10/s", i-1, i, gap)
			}
		}
		if took := rec.times[49].Sub(start).Round(time.Microsecond); took != 4900*time.Millisecond {
			t.Errorf("the 50th request went at %v, want 4.9s at 10/s", took)
		}
	})
}

// A request that may not wait for a shared token, or not that long, is
// refused as by a local bucket, and takes nothing from the store.
func TestSharedLimitRefusalsTakeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			limit  Limit
			reason LimitReason
		}{
			{Limit{FailFast: true}, "fail-fast"},
			{Limit{MaxWait: 50 * time.Millisecond}, "max-wait"},
		} {
			mem := NewMemoryStore()
			l := tt.limit
			l.Name, l.Rate, l.Burst, l.Store = "api", 10, 1, mem
			tr := New(newScript(answer(200)).mock(), WithLimit(l))
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
			_, err := callOnce(t, tr, context.Background())
			var limited *ClientLimitError
			if !errors.As(err, &limited) || limited.Reason != tt.reason || limited.RetryIn != 100*time.Millisecond {
				t.Errorf("%s: err = %v, want a %s ClientLimitError with RetryIn 100ms", tt.reason, err, tt.reason)
			}
			if w, _ := mem.Take(context.Background(), store.ScopeKey("api", host), 1, 10, 1, 0); w != 100*time.Millisecond {
				t.Errorf("%s: the refused request took a token: the next is %v away, want 100ms", tt.reason, w)
			}
		}
	})
}

// A request that must not wait long enough for a shared token, because of
// its context's deadline, ends with that, taking nothing.
func TestSharedLimitRespectsTheContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 1, Store: mem}))
		if _, err := callOnce(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if _, err := callOnce(t, tr, ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the deadline's", err)
		}
		if w, _ := mem.Take(context.Background(), store.ScopeKey("api", host), 1, 1, 1, 0); w != time.Second {
			t.Errorf("the refused request took a token: the next is %v away, want 1s", w)
		}
	})
}

// deafStore hears neither failures nor trips: a transport's local breaker
// opens while the shared one stays as the test sets it.
type deafStore struct{ *MemoryStore }

func (deafStore) BreakerFailed(context.Context, string, bool, store.Cause, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, errors.New("not heard")
}

func (deafStore) BreakerTripped(context.Context, string, store.Trip, *store.Rules) error {
	return errors.New("not heard")
}

// A shared probe granted to an attempt that is not sent after all (a
// later layer refuses it) or whose outcome does not count (its caller
// gave up) is given back: another transport probes at once, rather than
// every transport being refused half-open for ProbeTimeout.
func TestSharedProbeGivenBackWhenUnused(t *testing.T) {
	for _, tt := range []struct {
		name string
		// prober makes a transport on store whose call gets the shared
		// probe and does not use it; call makes that call.
		prober func(t *testing.T, mem *MemoryStore) *Transport
		call   func(t *testing.T, tr *Transport) error
	}{
		{"limit refuses", func(t *testing.T, mem *MemoryStore) *Transport {
			tr := New(newScript(answer(200)).mock(), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: mem}),
				WithLimit(Limit{Rate: rate.Every(time.Hour), Burst: 1, FailFast: true}))
			if _, err := callOnce(t, tr, context.Background()); err != nil { // spends the hour's token
				t.Fatal(err)
			}
			return tr
		}, nil},
		{"cooldown refuses", func(_ *testing.T, mem *MemoryStore) *Transport {
			tr := New(newScript(answer(200)).mock(), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: mem}))
			tr.gate.PauseLocal(host, time.Now().Add(time.Hour)) // past the wait budget
			return tr
		}, nil},
		{"local breaker refuses", func(t *testing.T, mem *MemoryStore) *Transport {
			tr := New(newScript(answer(503)).mock(), WithRetry(RetryPolicy{MaxAttempts: 1}),
				WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour, Store: deafStore{mem}}))
			_, _ = tr.RoundTrip(mustRequest(t, http.MethodGet, nil)) // opens for an hour, here only
			return tr
		}, nil},
		{"caller cancels", func(_ *testing.T, mem *MemoryStore) *Transport {
			hang := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				<-r.Context().Done()
				return nil, r.Context().Err()
			})
			return New(hang, WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: mem}))
		}, func(t *testing.T, tr *Transport) error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := callOnce(t, tr, ctx)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := NewMemoryStore()
				policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: mem}
				rules := policy.Rules()
				prober := tt.prober(t, mem)
				_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules) // another replica trips it
				time.Sleep(time.Second)
				call := tt.call
				if call == nil {
					call = func(t *testing.T, tr *Transport) error { _, err := callOnce(t, tr, context.Background()); return err }
				}
				if err := call(t, prober); err == nil {
					t.Fatal("the prober's call went through")
				}
				other := New(newScript(answer(200)).mock(), WithBreaker(policy))
				if _, err := callOnce(t, other, context.Background()); err != nil {
					t.Errorf("another transport after the unused probe: %v, want it to probe", err)
				}
			})
		})
	}
}

// A transport waiting out a shared pause reads the store again when it
// wakes: a later hint another transport stored meanwhile holds it too.
func TestSharedPauseExtendedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		rec := &recording{base: newScript(answer(200)).mock()}
		b := New(rec, WithPause(PausePolicy{Store: mem, Spread: time.Nanosecond}))
		start := time.Now()
		_ = mem.Pause(context.Background(), host, start.Add(time.Second))
		done := goCallOnce(t, b, context.Background())
		time.Sleep(100 * time.Millisecond)
		_ = mem.Pause(context.Background(), host, start.Add(10*time.Second)) // a later 429 elsewhere
		if err := <-done; err != nil {
			t.Error(err)
		}
		if sent := rec.times[0].Sub(start); sent < 10*time.Second {
			t.Errorf("sent %v after start, inside the fleet's pause to 10s", sent)
		}
	})
}

// A success clears the failures the fleet counted while it was in flight,
// even when none were counted at its admission: fail, fail, success, fail
// is no three failures in a row.
func TestSharedSuccessClearsFailuresCountedInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		policy := BreakerPolicy{ConsecutiveFailures: 3, Cooldown: time.Hour, Store: mem}
		rules := policy.Rules()
		mock := newScript(answer(200)).mock()
		b := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(time.Second)
			return mock.RoundTrip(r)
		}), WithBreaker(policy))
		done := goCallOnce(t, b, context.Background())
		time.Sleep(100 * time.Millisecond)
		_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules)
		_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules)
		if err := <-done; err != nil { // b's success, after the two failures
			t.Error(err)
		}
		if sb, _ := mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules); sb.State != store.Closed || sb.Failures != 1 {
			t.Errorf("fail, fail, success, fail: %+v, want closed with one failure", sb)
		}
	})
}

// Through WithStore, whose store answers each admission in one round
// trip, a success admitted with no failure counted is told with the next
// admission, or by itself after breaker.UnsaidFor when none comes: either
// way it clears the failures other transports counted while it was in
// flight, and none counted after the telling.
func TestSharedSuccessToldLateClearsFailuresCountedInFlight(t *testing.T) {
	for _, next := range []bool{true, false} {
		name := "told by itself"
		if next {
			name = "told with the next admission"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := NewMemoryStore()
				policy := BreakerPolicy{ConsecutiveFailures: 3, Cooldown: time.Hour}
				rules := policy.Rules()
				mock := newScript(answer(200), answer(200)).mock()
				slow := true
				b := New(roundTripFunc(func(r *http.Request) (*http.Response, error) {
					if slow {
						time.Sleep(time.Second)
					}
					return mock.RoundTrip(r)
				}), WithStore(mem), WithBreaker(policy))
				done := goCallOnce(t, b, context.Background())
				time.Sleep(100 * time.Millisecond)
				_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules)
				_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules)
				if err := <-done; err != nil { // b's success, after the two failures
					t.Fatal(err)
				}
				if sb, _ := mem.BreakerRead(context.Background(), host, &rules); sb.Failures != 2 {
					t.Fatalf("right after the success: %d failures, want the 2 kept until it is told", sb.Failures)
				}
				slow = false
				if next {
					if _, err := callOnce(t, b, context.Background()); err != nil {
						t.Fatal(err)
					}
				} else {
					time.Sleep(breaker.UnsaidFor)
					synctest.Wait()
				}
				if sb, _ := mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules); sb.State != store.Closed || sb.Failures != 1 {
					t.Errorf("fail, fail, success, fail: %+v, want closed with one failure", sb)
				}
			})
		})
	}
}

// blipStore fails the first trip told to it, and counts no failure.
type blipStore struct {
	*MemoryStore
	trips atomic.Int64
}

func (b *blipStore) BreakerTripped(ctx context.Context, key string, trip store.Trip, r *store.Rules) error {
	if b.trips.Add(1) == 1 {
		return errors.New("i/o timeout")
	}
	return b.MemoryStore.BreakerTripped(ctx, key, trip, r)
}

func (b *blipStore) BreakerFailed(context.Context, string, bool, store.Cause, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, errors.New("i/o timeout")
}

// A local trip the store failed to hear is told again, by the next
// request the open breaker refuses.
func TestSharedTripToldAgainAfterAFailedTelling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &blipStore{MemoryStore: NewMemoryStore()}
		policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour, Store: mem}
		a := New(newScript(answer(503)).mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(policy))
		_, _ = callOnce(t, a, context.Background()) // trips a; the store does not hear it
		var open *CircuitOpenError
		if _, err := callOnce(t, a, context.Background()); !errors.As(err, &open) {
			t.Fatalf("a after its trip: %v, want it open", err)
		}
		rules := policy.Rules()
		if sb, _ := mem.MemoryStore.BreakerAdmit(context.Background(), host, &rules); sb.State != store.Open {
			t.Errorf("a is open for an hour, the mem never heard: %+v (told %d times)", sb, mem.trips.Load())
		}
	})
}
