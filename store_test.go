package ratewise

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestSharedLimitHoldsAcrossTransports(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore()
		rec := &recording{base: newScript(answer(200)).mock()}
		limit := Limit{Name: "api", Rate: 10, Burst: 1, Store: store}
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
		store := NewMemoryStore()
		refused := newScript(answer(429, "Retry-After", "3"))
		ok := &recording{base: newScript(answer(200)).mock()}
		a := New(refused.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithCooldown(CooldownPolicy{Store: store}))
		b := New(ok, WithCooldown(CooldownPolicy{Store: store, Spread: time.Nanosecond}))
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
		store := NewMemoryStore()
		failing := newScript(answer(503))
		other := newScript(answer(200))
		policy := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, Store: store}
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
		if !errors.As(err, &open) || open.State != "open" {
			t.Fatalf("b after a's trip: err = %v, want the shared breaker open", err)
		}
		if other.calls() != 1 {
			t.Errorf("b sent %d requests, want only the one before the trip", other.calls())
		}
	})
}

func TestSharedBreakerOneProbeAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore()
		slow := newScript(answer(200))
		policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second, Store: store}
		rules := policy.Rules()
		if _, err := store.BreakerFailed(context.Background(), host, false, &rules); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		// The first request after the cooldown is the probe; while it is out,
		// another transport's request is refused, half-open.
		sb, _ := store.BreakerAdmit(context.Background(), host, &rules)
		if sb.State != BreakerHalfOpen || !sb.Probe {
			t.Fatalf("first after the cooldown = %+v, want the probe", sb)
		}
		b := New(slow.mock(), WithBreaker(policy))
		_, err := callOnce(t, b, context.Background())
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.State != "half-open" || slow.calls() != 0 {
			t.Fatalf("during the probe: err = %v, %d sent; want half-open and nothing sent", err, slow.calls())
		}
		// The probe succeeds: the breaker closes for everyone.
		if err := store.BreakerSucceeded(context.Background(), host, true, &rules); err != nil {
			t.Fatal(err)
		}
		if status, err := callOnce(t, b, context.Background()); status != 200 {
			t.Fatalf("after the probe's success: %d, %v", status, err)
		}
	})
}

// failingStore is a store whose every call fails, closed or not.
type failingStore struct{ closed bool }

func (f failingStore) err() error {
	err := errors.New("connection refused")
	if f.closed {
		return errors.Join(ErrStoreUnavailable, err)
	}
	return err
}
func (f failingStore) Take(context.Context, string, rate.Limit, int) (time.Duration, error) {
	return 0, f.err()
}
func (f failingStore) Pause(context.Context, string, time.Time) error { return f.err() }
func (f failingStore) PausedUntil(context.Context, string) (time.Time, error) {
	return time.Time{}, f.err()
}
func (f failingStore) BreakerAdmit(context.Context, string, *BreakerRules) (SharedBreaker, error) {
	return SharedBreaker{}, f.err()
}
func (f failingStore) BreakerFailed(context.Context, string, bool, *BreakerRules) (SharedBreaker, error) {
	return SharedBreaker{}, f.err()
}
func (f failingStore) BreakerSucceeded(context.Context, string, bool, *BreakerRules) error {
	return f.err()
}
func (f failingStore) BreakerTripped(context.Context, string, time.Time, int, *BreakerRules) error {
	return f.err()
}

func TestStoreDownFallsBackToLocalState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := failingStore{}
		rec := &recording{base: newScript(answer(200)).mock()}
		tr := New(rec, WithLimit(Limit{Rate: 10, Burst: 1, Store: down}), WithCooldown(CooldownPolicy{Store: down}),
			WithBreaker(BreakerPolicy{Store: down}))
		for range 5 {
			if status, err := callOnce(t, tr, context.Background()); status != 200 {
				t.Fatalf("with the store down: %d, %v; want the call to go on local state", status, err)
			}
		}
		// The local bucket stands in: still 10/s.
		if last := rec.times[4].Sub(rec.times[0]); last != 400*time.Millisecond {
			t.Errorf("5 calls took %v, want the local 10/s", last)
		}
	})
}

func TestStoreDownFailsClosed(t *testing.T) {
	closed := failingStore{closed: true}
	for _, tt := range []struct {
		name string
		opt  Option
		want any
	}{
		{"limit", WithLimit(Limit{Rate: 10, Store: closed}), new(*LimitError)},
		{"cooldown", WithCooldown(CooldownPolicy{Store: closed}), new(*LimitError)},
		{"breaker", WithBreaker(BreakerPolicy{Store: closed}), new(*CircuitOpenError)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript(answer(200))
			tr := New(s.mock(), tt.opt)
			_, err := callOnce(t, tr, context.Background())
			if !errors.Is(err, ErrStoreUnavailable) || !errors.As(err, tt.want) || s.calls() != 0 {
				t.Errorf("err = %v, %d sent; want a %T matching ErrStoreUnavailable and nothing sent", err, s.calls(), tt.want)
			}
			if !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("err = %v, want the store's cause", err)
			}
		})
	}
}

func TestLimitStoreValidation(t *testing.T) {
	store := NewMemoryStore()
	for _, l := range []Limit{
		{Store: store},
		{Store: store, Rate: 1, MinSpacing: time.Second},
		{Store: store, Rate: 1, Burst: 5, Reserve: 1},
		{Store: store, Rate: 1, Adaptive: true},
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "has a Store") {
			t.Errorf("Validate(%+v) = %v", l, err)
		}
	}
	if err := (Limit{Store: store, Rate: 1, Burst: 5, MaxConcurrent: 2}).Validate(); err != nil {
		t.Errorf("a valid shared limit: %v", err)
	}
}

func TestMemoryStoreBreakerStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		rules := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Minute,
			Escalation: []time.Duration{10 * time.Minute}, Decay: time.Hour}.Rules()
		var states []string
		note := func(sb SharedBreaker) { states = append(states, sb.State.String()) }
		sb, _ := m.BreakerFailed(ctx, "k", false, &rules)
		note(sb) // 1 failure: closed
		sb, _ = m.BreakerFailed(ctx, "k", false, &rules)
		note(sb) // 2: open for a minute
		if sb.Until != time.Now().Add(time.Minute) || sb.Level != 0 {
			t.Fatalf("trip = %+v, want a minute at level 0", sb)
		}
		time.Sleep(time.Minute)
		sb, _ = m.BreakerAdmit(ctx, "k", &rules)
		note(sb) // half-open: the probe
		sb, _ = m.BreakerFailed(ctx, "k", true, &rules)
		note(sb) // the probe failed: open at the next level
		if sb.Level != 1 || sb.Until != time.Now().Add(10*time.Minute) {
			t.Fatalf("after a failed probe = %+v, want 10 minutes at level 1", sb)
		}
		time.Sleep(10 * time.Minute)
		sb, _ = m.BreakerAdmit(ctx, "k", &rules)
		note(sb)
		_ = m.BreakerSucceeded(ctx, "k", true, &rules)
		sb, _ = m.BreakerAdmit(ctx, "k", &rules)
		note(sb) // closed, the level remembered to decay
		want := []string{"closed", "open", "half-open", "open", "half-open", "closed"}
		if !slices.Equal(states, want) || sb.Level != 1 {
			t.Errorf("states %v (level %d), want %v at level 1", states, sb.Level, want)
		}
		time.Sleep(time.Hour)
		if sb, _ := m.BreakerAdmit(ctx, "k", &rules); sb.Level != 0 {
			t.Errorf("level after an hour's decay = %d, want 0", sb.Level)
		}
	})
}

func TestMemoryStoreBucketAndPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		if w, _ := m.Take(ctx, "k", 2, 1); w != 0 {
			t.Fatalf("first take waits %v", w)
		}
		if w, _ := m.Take(ctx, "k", 2, 1); w != 500*time.Millisecond {
			t.Fatalf("second take waits %v, want 500ms at 2/s", w)
		}
		if w, _ := m.Take(ctx, "k", 2, 1); w != 500*time.Millisecond {
			t.Errorf("a refused take must not take a token: third waits %v", w)
		}
		now := time.Now()
		_ = m.Pause(ctx, "p", now.Add(3*time.Second))
		_ = m.Pause(ctx, "p", now.Add(time.Second)) // the later wins
		if until, _ := m.PausedUntil(ctx, "p"); !until.Equal(now.Add(3 * time.Second)) {
			t.Errorf("paused until %v, want the later 3s", until.Sub(now))
		}
		// Many keys come and go: what has nothing to say is dropped.
		for i := range 1000 {
			_, _ = m.Take(ctx, strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), 100, 1)
			time.Sleep(10 * time.Millisecond)
		}
		m.mu.Lock()
		n := len(m.buckets)
		m.mu.Unlock()
		if n > 300 {
			t.Errorf("%d buckets held after 1,000 keys at 100/s, most of them full; want them dropped", n)
		}
	})
}
