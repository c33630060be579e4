package redis

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/internal/redistest"
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
	ctx := context.Background()
	for i := range 2 {
		if w, err := s.Take(ctx, "k", 10, 2); err != nil || w != 0 {
			t.Fatalf("take %d of the burst of 2: wait %v, %v", i+1, w, err)
		}
	}
	w, err := s.Take(ctx, "k", 10, 2)
	if err != nil || w <= 50*time.Millisecond || w > 100*time.Millisecond {
		t.Fatalf("third take: wait %v, %v; want up to the 100ms of one token at 10/s", w, err)
	}
	// A refused take takes nothing: the wait shrinks, it does not grow.
	w2, _ := s.Take(ctx, "k", 10, 2)
	if w2 > w {
		t.Errorf("a refused take consumed a token: wait went from %v to %v", w, w2)
	}
	time.Sleep(w2)
	if w, err := s.Take(ctx, "k", 10, 2); err != nil || w != 0 {
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
	ctx := context.Background()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: 200 * time.Millisecond,
		Escalation: []time.Duration{400 * time.Millisecond}, Decay: time.Hour, ProbeTimeout: time.Second}.Rules()
	var states []string
	note := func(sb ratewise.SharedBreaker, err error) ratewise.SharedBreaker {
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, sb.State.String())
		return sb
	}
	note(s.BreakerFailed(ctx, "k", false, &rules))
	_ = s.BreakerSucceeded(ctx, "k", false, &rules) // a success clears the count
	note(s.BreakerFailed(ctx, "k", false, &rules))
	sb := note(s.BreakerFailed(ctx, "k", false, &rules)) // two in a row: open
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
	sb = note(s.BreakerFailed(ctx, "k", true, &rules)) // the probe failed: the next level
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
	if err := s.BreakerTripped(ctx, "j", until, 1, &rules); err != nil {
		t.Fatal(err)
	}
	sb, _ = s.BreakerAdmit(ctx, "j", &rules)
	if sb.State != ratewise.BreakerOpen || sb.Level != 1 || sb.Until.UnixMilli() != until.UnixMilli() {
		t.Errorf("after BreakerTripped: %+v", sb)
	}
	assertAllExpire(t, client, "t:*")
}

// assertAllExpire fails when a key matching pattern has no expiry.
func assertAllExpire(t *testing.T, client *goredis.Client, pattern string) {
	t.Helper()
	ctx := context.Background()
	keys, err := client.Keys(ctx, pattern).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := client.PTTL(ctx, k).Val(); ttl < 0 {
			t.Errorf("key %s has no expiry", k)
		}
	}
}

func TestStoresWithOnePrefixShareState(t *testing.T) {
	srv := redistest.Start(t)
	a, _ := newStore(t, srv, Options{})
	b, _ := newStore(t, srv, Options{})
	other, _ := newStore(t, srv, Options{Prefix: "fleet2:"})
	ctx := context.Background()
	_, _ = a.Take(ctx, "k", 1, 1)
	if w, _ := b.Take(ctx, "k", 1, 1); w == 0 {
		t.Error("b took the token a took: the stores do not share the bucket")
	}
	if w, _ := other.Take(ctx, "k", 1, 1); w != 0 {
		t.Error("a store with another prefix shares the bucket")
	}
}

func TestOutageFallsBackOrFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	fallback, _ := newStore(t, srv, Options{Logger: logger, Recheck: 100 * time.Millisecond})
	closed, _ := newStore(t, srv, Options{OnFailure: FailClosed, Recheck: 100 * time.Millisecond})
	ctx := context.Background()
	if _, err := fallback.Take(ctx, "k", 100, 10); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := fallback.Take(ctx, "k", 100, 10)
	if err == nil || errors.Is(err, ratewise.ErrStoreUnavailable) {
		t.Fatalf("fallback store with Redis down: %v; want an error that does not fail closed", err)
	}
	start := time.Now()
	for range 20 { // within Recheck: Redis is not asked, no timeout is waited
		_, _ = fallback.Take(ctx, "k", 100, 10)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("20 takes during an outage took %v: each waited for Redis", took)
	}
	if _, err := closed.Take(ctx, "k", 100, 10); !errors.Is(err, ratewise.ErrStoreUnavailable) {
		t.Errorf("fail-closed store with Redis down: %v, want ErrStoreUnavailable", err)
	}
	if fallback.Outages() != 1 || fallback.Available() {
		t.Errorf("outages = %d, available %v; want one, down", fallback.Outages(), fallback.Available())
	}
	srv.Start()
	time.Sleep(150 * time.Millisecond) // past Recheck
	if _, err := fallback.Take(ctx, "k", 100, 10); err != nil {
		t.Errorf("after Redis came back: %v", err)
	}
	if !fallback.Available() || fallback.Outages() != 1 {
		t.Errorf("available %v, outages %d after the outage", fallback.Available(), fallback.Outages())
	}
	out := logs.String()
	if strings.Count(out, "event=store_down") != 1 || strings.Count(out, "event=store_up") != 1 {
		t.Errorf("logs, want one line for the outage and one for its end:\n%s", out)
	}
}

func TestCallersContextIsNoOutage(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Take(ctx, "k", 1, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the caller's", err)
	}
	if s.Outages() != 0 || !s.Available() {
		t.Errorf("a cancelled caller counted as an outage")
	}
}
