package redis

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// youtube-remediation-plan.md, Phase 2: the shared breaker keeps when it
// opened and what tripped it (openedAt, lastTriggeredBy, triggerMessage),
// which BreakerRead reports without changing anything, and a second
// detection soon after a good probe ("within 24h") opens it a level up.
func TestBreakerReadAndRetripEscalation(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	ctx := context.Background()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 1, Cooldown: 100 * time.Millisecond,
		Escalation: []time.Duration{300 * time.Millisecond}, Decay: time.Hour, RetripWindow: time.Hour,
		ProbeTimeout: time.Second}.Rules()

	if sb, err := s.BreakerRead(ctx, "k", &rules); err != nil || sb.State != store.Closed || !sb.OpenedAt.IsZero() {
		t.Fatalf("an unknown breaker: %+v, %v; want closed, never opened", sb, err)
	}
	if n := client.Exists(ctx, "t:breaker:{k}").Val(); n != 0 {
		t.Fatal("BreakerRead created the breaker")
	}

	cause := store.Cause{StatusCode: 200, Class: uint8(ratewise.RateLimited), Detail: "Sign in to confirm you’re not a bot"}
	before := time.Now()
	first, err := s.BreakerFailed(ctx, "k", false, cause, &rules)
	if err != nil || first.State != store.Open || first.Level != 0 {
		t.Fatalf("first detection: %+v, %v; want open at level 0", first, err)
	}
	sb, err := s.BreakerRead(ctx, "k", &rules)
	if err != nil || sb.State != store.Open || sb.Cause != cause || sb.OpenedAt.Before(before.Truncate(time.Millisecond)) ||
		sb.OpenedAt.After(time.Now()) || !sb.Until.Equal(first.Until) {
		t.Fatalf("BreakerRead of the open breaker: %+v, %v; want open until %v since the trip, caused by %+v", sb, err, first.Until, cause)
	}

	time.Sleep(time.Until(first.Until) + 10*time.Millisecond)
	if sb, _ := s.BreakerRead(ctx, "k", &rules); sb.State != store.HalfOpen || sb.Probe {
		t.Fatalf("after the cooldown, read: %+v; want half-open, no probe granted", sb)
	}
	probe, _ := s.BreakerAdmit(ctx, "k", &rules)
	if !probe.Probe {
		t.Fatalf("the read took the probe: admit = %+v", probe)
	}
	if err := s.BreakerSucceeded(ctx, "k", true, &rules); err != nil {
		t.Fatal(err)
	}
	if sb, _ := s.BreakerRead(ctx, "k", &rules); sb.State != store.Closed || sb.Cause != cause {
		t.Fatalf("after a good probe: %+v; want closed, the last cause kept", sb)
	}

	second, err := s.BreakerFailed(ctx, "k", false, cause, &rules)
	if err != nil || second.Level != 1 || time.Until(second.Until) <= 200*time.Millisecond {
		t.Errorf("a second detection soon after: %+v, %v; want 300ms at level 1", second, err)
	}

	// A local trip told with its cause and time.
	opened := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	trip := store.Trip{OpenedAt: opened, Until: time.Now().Add(time.Minute), Level: 1,
		Cause: store.Cause{StatusCode: 503, Detail: "backend overloaded"}}
	if err := s.BreakerTripped(ctx, "j", trip, &rules); err != nil {
		t.Fatal(err)
	}
	if sb, _ := s.BreakerRead(ctx, "j", &rules); sb.State != store.Open || !sb.OpenedAt.Equal(opened) || sb.Cause != trip.Cause || sb.Level != 1 {
		t.Errorf("after BreakerTripped: %+v; want open since %v at level 1, caused by %+v", sb, opened, trip.Cause)
	}
	assertAllExpire(t, client, "t:*")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// youtube-remediation-plan.md, Phase 2 "Multi-instance: all backend
// instances share breaker state" and "Batch fail-fast:
// isCircuitBreakerBlocking()": a replica that has sent nothing reports,
// through Redis, the breaker another replica opened, with when and why.
func TestReplicaSeesTheBreakerAnotherOpened(t *testing.T) {
	srv := redistest.Start(t)
	mem, _ := newStore(t, srv, Options{Prefix: "t:"})
	policy := ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Minute, Store: mem}
	failing := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("backend overloaded\n"))}, nil
	})
	a := ratewise.New(failing, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}), ratewise.WithBreaker(policy))
	b := ratewise.New(failing, ratewise.WithBreaker(policy))
	const host = "api.test"
	if blocked, _ := b.Blocking(host); blocked {
		t.Fatal("b blocked before anything happened")
	}
	before := time.Now().Truncate(time.Millisecond)
	for range 2 {
		if err := get(a, "http://"+host+"/x"); err != nil {
			t.Fatal(err)
		}
	}
	blocked, d := b.Blocking(host)
	if !blocked || d <= 55*time.Second || d > time.Minute {
		t.Errorf("b.Blocking = %v, %v; want true, about a minute", blocked, d)
	}
	st := b.KeyStatus(host).Breaker
	want := ratewise.BreakerCause{StatusCode: 503, Class: ratewise.Retryable, Detail: "backend overloaded"}
	if st.State != ratewise.BreakerOpen || st.Cause != want || st.OpenedAt.Before(before) || st.OpenedAt.After(time.Now()) {
		t.Errorf("b's status = %+v; want open since a's trip, caused by %+v", st, want)
	}
}
