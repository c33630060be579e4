package redis

import (
	"context"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

func newStore(t *testing.T, srv *redistest.Server, opts Options) (*Store, *goredis.Client) {
	t.Helper()
	client := srv.Client()
	t.Cleanup(func() { _ = client.Close() })
	return New(client, opts), client
}

func TestTakeIsATokenBucket(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{})
	tokenBucket(t, s)
}

// tokenBucket takes from a bucket of 10/s and 2 at once: the burst, then a
// wait of a token, a refused take that takes nothing, and a take after the
// wait.
func tokenBucket(t *testing.T, s *Store) {
	ctx := context.Background()
	start := time.Now()
	for i := range 2 {
		if w, err := s.Take(ctx, "k", 1, 10, 2, 0); err != nil || w != 0 {
			t.Fatalf("take %d of the burst of 2: wait %v, %v", i+1, w, err)
		}
	}
	if since := time.Since(start); since > 80*time.Millisecond {
		// A machine this loaded may have refilled the token the third
		// take is to wait for: the burst has held, and the test ends.
		t.Logf("%v since the first take: the third is not checked", since)
		return
	}
	w, err := s.Take(ctx, "k", 1, 10, 2, 0)
	if err != nil || w <= 0 || w > 100*time.Millisecond {
		t.Fatalf("third take: wait %v, %v; want up to the 100ms of one token at 10/s", w, err)
	}
	// A refused take takes nothing: the wait shrinks, it does not grow.
	w2, _ := s.Take(ctx, "k", 1, 10, 2, 0)
	if w2 > w {
		t.Errorf("a refused take consumed a token: wait went from %v to %v", w, w2)
	}
	time.Sleep(w2)
	if w, err := s.Take(ctx, "k", 1, 10, 2, 0); err != nil || w != 0 {
		t.Errorf("after the wait: %v, %v", w, err)
	}
}

func TestPausesTheLaterWinsAndExpire(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	ctx := context.Background()
	now := time.Now()
	_ = s.Pause(ctx, "api.test", now.Add(400*time.Millisecond))
	_ = s.Pause(ctx, "api.test", now.Add(100*time.Millisecond)) // earlier: ignored
	until, err := s.PausedUntil(ctx, "api.test")
	if err != nil || until.UnixMilli() != now.Add(400*time.Millisecond).UnixMilli() {
		t.Fatalf("PausedUntil = %v, %v; want the later pause", until.Sub(now), err)
	}
	if ttl := client.PTTL(ctx, "t:pause:{api.test}").Val(); ttl <= 0 || ttl > 400*time.Millisecond {
		t.Errorf("the pause's key expires in %v, want at its end", ttl)
	}
	if until, err := s.PausedUntil(ctx, "never"); err != nil || !until.IsZero() {
		t.Errorf("an unknown key: %v, %v; want the zero time", until, err)
	}
	time.Sleep(450 * time.Millisecond)
	if n := client.Exists(ctx, "t:pause:{api.test}").Val(); n != 0 {
		t.Error("the pause's key outlived the pause")
	}
}

func TestBreakerStateMachine(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	breakerStateMachine(t, s)
	assertAllExpire(t, client, "t:*")
}

// breakerStateMachine takes a shared breaker through its states: closed,
// counted, open, half-open with one probe, open a level up, closed; and
// a local trip published.
func breakerStateMachine(t *testing.T, s *Store) {
	ctx := context.Background()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: 200 * time.Millisecond,
		Escalation: []time.Duration{400 * time.Millisecond}, Decay: time.Hour, ProbeTimeout: time.Second}.Rules()
	var states []string
	note := func(sb store.Breaker, err error) store.Breaker {
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, sb.State.String())
		return sb
	}
	note(s.BreakerFailed(ctx, "k", false, store.Cause{}, &rules))
	_ = s.BreakerSucceeded(ctx, "k", false, &rules) // a success clears the count
	note(s.BreakerFailed(ctx, "k", false, store.Cause{}, &rules))
	sb := note(s.BreakerFailed(ctx, "k", false, store.Cause{}, &rules)) // two in a row: open
	if sb.Level != 0 || time.Until(sb.Until) <= 100*time.Millisecond {
		t.Fatalf("trip = %+v, want 200ms at level 0", sb)
	}
	note(s.BreakerAdmit(ctx, "k", &rules)) // open
	time.Sleep(time.Until(sb.Until) + 10*time.Millisecond)
	probe := note(s.BreakerAdmit(ctx, "k", &rules))
	other := note(s.BreakerAdmit(ctx, "k", &rules))
	if !probe.Probe || other.Probe {
		t.Fatalf("half-open: first %+v, second %+v; want only the first to probe", probe, other)
	}
	sb = note(s.BreakerFailed(ctx, "k", true, store.Cause{}, &rules)) // the probe failed: the next level
	if sb.Level != 1 || time.Until(sb.Until) <= 300*time.Millisecond {
		t.Fatalf("after the failed probe = %+v, want 400ms at level 1", sb)
	}
	time.Sleep(time.Until(sb.Until) + 10*time.Millisecond)
	note(s.BreakerAdmit(ctx, "k", &rules))
	_ = s.BreakerSucceeded(ctx, "k", true, &rules)
	sb = note(s.BreakerAdmit(ctx, "k", &rules))
	want := []string{"closed", "closed", "open", "open", "half-open", "half-open", "open", "half-open", "closed"}
	if !slices.Equal(states, want) || sb.Level != 1 {
		t.Errorf("states %v at level %d, want %v at level 1", states, sb.Level, want)
	}
	// A local trip is published: the later end and higher level win.
	until := time.Now().Add(time.Minute)
	if err := s.BreakerTripped(ctx, "j", store.Trip{Until: until, Level: 1}, &rules); err != nil {
		t.Fatal(err)
	}
	sb, _ = s.BreakerAdmit(ctx, "j", &rules)
	if sb.State != store.Open || sb.Level != 1 || sb.Until.UnixMilli() != until.UnixMilli() {
		t.Errorf("after BreakerTripped: %+v", sb)
	}
}

// keyGone is what PTTL answers for a key that does not exist (go-redis
// passes Redis's -2 through, as it does -1 for a key with no expiry): one
// KEYS listed may have expired since, a bucket's TTL being its refill, a
// few milliseconds, which a loaded machine can take between the two calls.
const keyGone = -2

// assertAllExpire fails when a key matching pattern has no expiry.
func assertAllExpire(t *testing.T, client *goredis.Client, pattern string) {
	t.Helper()
	if err := reportKeysWithoutExpiry(t, context.Background(), client, pattern); err != nil {
		t.Fatal(err)
	}
}

// reportKeysWithoutExpiry reports, each as an error of t, the keys of
// client matching pattern that have no expiry. It may run beside others
// (a cluster's masters, at once).
func reportKeysWithoutExpiry(t *testing.T, ctx context.Context, client *goredis.Client, pattern string) error {
	keys, err := client.Keys(ctx, pattern).Result()
	for _, k := range keys {
		if ttl := client.PTTL(ctx, k).Val(); ttl < 0 && ttl != keyGone {
			t.Errorf("key %s has no expiry", k)
		}
	}
	return err
}

func TestStoresWithOnePrefixShareState(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newStore(t, srv, Options{})
	b, _ := newStore(t, srv, Options{})
	other, _ := newStore(t, srv, Options{Prefix: "fleet2:"})
	ctx := context.Background()
	_, _ = a.Take(ctx, "k", 1, 1, 1, 0)
	if w, _ := b.Take(ctx, "k", 1, 1, 1, 0); w == 0 {
		t.Error("b took the token a took: the stores do not share the bucket")
	}
	if w, _ := other.Take(ctx, "k", 1, 1, 1, 0); w != 0 {
		t.Error("a store with another prefix shares the bucket")
	}
}

func TestTakeReservesWithinMaxWait(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{})
	ctx := context.Background()
	// A wait is counted on Redis's clock from the burst: it is shorter by
	// the time that passed since, which a loaded machine stretches.
	var burst time.Time
	near := func(w, want time.Duration) bool { return w > want-time.Since(burst)-5*time.Millisecond && w <= want }
	burst = time.Now()
	if w, err := s.Take(ctx, "k", 1, 10, 1, 0); err != nil || w != 0 {
		t.Fatalf("the burst: wait %v, %v", w, err)
	}
	// A token 100ms away does not fit 50ms: nothing is taken.
	if w, err := s.Take(ctx, "k", 1, 10, 1, 50*time.Millisecond); err != nil || !near(w, 100*time.Millisecond) {
		t.Fatalf("take within 50ms: wait %v, %v; want the 100ms until a token", w, err)
	}
	// Within a second: reserved, each waiter the next turn.
	for i := 1; i <= 3; i++ {
		want := time.Duration(i) * 100 * time.Millisecond
		if w, err := s.Take(ctx, "k", 1, 10, 1, time.Second); err != nil || !near(w, want) {
			t.Fatalf("reservation %d: wait %v, %v; want %v", i, w, err, want)
		}
	}
	if w, _ := s.Take(ctx, "k", 1, 10, 1, 0); !near(w, 400*time.Millisecond) {
		t.Errorf("after three reservations the next token is %v away, want 400ms", w)
	}
	// A wait just over maxWait reserves nothing, whatever the rounding.
	if w, _ := s.Take(ctx, "k", 1, 10, 1, 350*time.Millisecond); w <= 350*time.Millisecond {
		t.Errorf("a take refused within 350ms answered %v, which would read as reserved", w)
	}
}

// adr-009-token-bucket-redis.md, acquire(tokens=n) and get_status, on
// Redis's clock: n tokens are taken at once or not at all, and Tokens
// reads the bucket without creating it.
func TestTakeNAndTokens(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{})
	ctx := context.Background()
	// The bucket refills 10 a second: a read finds what the takes left,
	// plus what refilled since the bucket was last exactly known (the
	// first take, which a full bucket answers whatever the time), which a
	// loaded machine makes more than a few hundredths.
	var taken time.Time
	near := func(got, want float64) bool {
		return got >= want && got <= want+10*time.Since(taken).Seconds()+0.01
	}
	tokens := func() float64 {
		t.Helper()
		n, err := s.Tokens(ctx, "k", 10, 4)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tokens(); n != 4 {
		t.Errorf("Tokens of a bucket never used = %v, want its burst of 4", n)
	}
	if keys := client.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Errorf("Tokens wrote %v", keys)
	}
	taken = time.Now()
	if w, err := s.Take(ctx, "k", 3, 10, 4, 0); err != nil || w != 0 {
		t.Fatalf("taking 3 of a full 4: wait %v, %v", w, err)
	}
	if n := tokens(); !near(n, 1) {
		t.Errorf("after taking 3 of 4: %v tokens, want 1", n)
	}
	// 2 more: one is there, the other up to 100ms away at 10/s. A machine
	// so loaded that the second has come already cannot tell a refused
	// take from a granted one: the steps above have held, and the test
	// ends there.
	tooLate := func() bool {
		if since := time.Since(taken); since > 80*time.Millisecond {
			t.Logf("%v since the first take: the second token may be there; the takes that follow are not checked", since)
			return true
		}
		return false
	}
	if tooLate() {
		return
	}
	if w, err := s.Take(ctx, "k", 2, 10, 4, 0); err != nil || w <= 0 || w > 100*time.Millisecond {
		t.Errorf("taking 2 with 1 there: wait %v, %v; want up to the 100ms until the second", w, err)
	}
	if n := tokens(); !near(n, 1) {
		t.Errorf("a refused take of 2 took part of them: %v tokens left, want 1", n)
	}
	if tooLate() {
		return
	}
	if w, err := s.Take(ctx, "k", 2, 10, 4, time.Second); err != nil || w <= 0 || w > 100*time.Millisecond {
		t.Errorf("taking 2 within a second: wait %v, %v; want them reserved within 100ms", w, err)
	}
	if n := tokens(); !near(n, -1) {
		t.Errorf("with one token reserved ahead: %v tokens, want -1", n)
	}
	assertAllExpire(t, client, "*")
}

// WindowFailures counts the failures within the last Window, sliding, as
// MemoryStore does: three within 70ms trip, though the first of the
// window's four is older than Window.
func TestWindowFailuresSlide(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	ctx := context.Background()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 100, WindowFailures: 3, Window: 300 * time.Millisecond}.Rules()
	fail := func(st store.Breakers) store.Breaker {
		start := time.Now()
		var sb store.Breaker
		for _, at := range []time.Duration{0, 250 * time.Millisecond, 310 * time.Millisecond, 320 * time.Millisecond} {
			time.Sleep(time.Until(start.Add(at)))
			var err error
			if sb, err = st.BreakerFailed(ctx, "k", false, store.Cause{}, &rules); err != nil {
				t.Fatal(err)
			}
		}
		return sb
	}
	sb, mb := fail(s), fail(ratewise.NewMemoryStore())
	if sb.State != store.Open || mb.State != store.Open {
		t.Errorf("3 failures within 70ms (WindowFailures 3 in 300ms): redis %v, MemoryStore %v; want both open", sb.State, mb.State)
	}
	// Below the count, the window's failures are kept as long as Window.
	for range 2 {
		if sb, _ := s.BreakerFailed(ctx, "j", false, store.Cause{}, &rules); sb.State != store.Closed {
			t.Fatalf("two failures: %+v, want closed", sb)
		}
	}
	if ttl := client.PTTL(ctx, "t:breaker-recent:{j}").Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Errorf("the window's failures expire in %v, want within the 300ms Window", ttl)
	}
	assertAllExpire(t, client, "t:*")
}

// A probe given back lets the next request probe at once; one given back
// by a request it is no longer granted to is left to its holder.
func TestBreakerProbeReleased(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	ctx := context.Background()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 1, Cooldown: 50 * time.Millisecond}.Rules()
	sb, _ := s.BreakerFailed(ctx, "k", false, store.Cause{}, &rules)
	time.Sleep(time.Until(sb.Until) + 10*time.Millisecond)
	first, err := s.BreakerAdmit(ctx, "k", &rules)
	if err != nil || !first.Probe || first.ProbeID == 0 {
		t.Fatalf("after the cooldown: %+v, %v; want a named probe", first, err)
	}
	if err := s.BreakerReleaseProbe(ctx, "k", first.ProbeID); err != nil {
		t.Fatal(err)
	}
	second, _ := s.BreakerAdmit(ctx, "k", &rules)
	if !second.Probe || second.ProbeID == first.ProbeID {
		t.Fatalf("after the probe was given back: %+v; want a new probe", second)
	}
	_ = s.BreakerReleaseProbe(ctx, "k", first.ProbeID) // late: no longer its
	if third, _ := s.BreakerAdmit(ctx, "k", &rules); third.Probe {
		t.Errorf("a stale release freed the probe of another: %+v", third)
	}
	_ = s.BreakerReleaseProbe(ctx, "gone", 1) // no breaker: nothing written
	assertAllExpire(t, client, "t:*")
	if n := client.Exists(ctx, "t:breaker:{gone}").Val(); n != 0 {
		t.Error("releasing the probe of no breaker wrote its key")
	}
}
