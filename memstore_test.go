package ratewise

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file tests MemoryStore, the store in process: its bucket, pauses
// and breaker state machine.

func TestMemoryStoreBreakerStateMachine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		rules := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Minute,
			Escalation: []time.Duration{10 * time.Minute}, Decay: time.Hour}.Rules()
		var states []string
		note := func(sb store.Breaker) { states = append(states, sb.State.String()) }
		sb, _ := m.BreakerFailed(ctx, "k", false, store.Cause{}, &rules)
		note(sb) // 1 failure: closed
		sb, _ = m.BreakerFailed(ctx, "k", false, store.Cause{}, &rules)
		note(sb) // 2: open for a minute
		if sb.Until != time.Now().Add(time.Minute) || sb.Level != 0 {
			t.Fatalf("trip = %+v, want a minute at level 0", sb)
		}
		time.Sleep(time.Minute)
		sb, _ = m.BreakerAdmit(ctx, "k", &rules)
		note(sb) // half-open: the probe
		sb, _ = m.BreakerFailed(ctx, "k", true, store.Cause{}, &rules)
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
		if w, _ := m.Take(ctx, "k", 1, 2, 1, 0); w != 0 {
			t.Fatalf("first take waits %v", w)
		}
		if w, _ := m.Take(ctx, "k", 1, 2, 1, 0); w != 500*time.Millisecond {
			t.Fatalf("second take waits %v, want 500ms at 2/s", w)
		}
		if w, _ := m.Take(ctx, "k", 1, 2, 1, 0); w != 500*time.Millisecond {
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
			_, _ = m.Take(ctx, strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String(), 1, 100, 1, 0)
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

func TestMemoryStoreTakeReservesWithinMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		_, _ = m.Take(ctx, "k", 1, 10, 1, 0) // the burst
		// A token 100ms away does not fit 50ms: nothing is taken.
		if w, _ := m.Take(ctx, "k", 1, 10, 1, 50*time.Millisecond); w != 100*time.Millisecond {
			t.Fatalf("take within 50ms = %v, want the 100ms until a token, reserving nothing", w)
		}
		// Within a second: reserved, each waiter the next turn.
		for i := 1; i <= 3; i++ {
			if w, _ := m.Take(ctx, "k", 1, 10, 1, time.Second); w != time.Duration(i)*100*time.Millisecond {
				t.Fatalf("reservation %d waits %v, want %v", i, w, time.Duration(i)*100*time.Millisecond)
			}
		}
		if w, _ := m.Take(ctx, "k", 1, 10, 1, 0); w != 400*time.Millisecond {
			t.Errorf("after three reservations, the next token is %v away, want 400ms", w)
		}
	})
}

// A shared bucket's turns come no earlier than its rate allows, to the
// nanosecond, as a server counting in whole nanoseconds (a GCRA) counts
// them: 20 a second, burst 10, 3000 takes at once (rate.Limiter's float
// tokens gave 75 of them a nanosecond early).
func TestMemoryStoreTurnsNeverComeEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		off := 0
		for i := range 3000 {
			due := time.Duration(max(i-9, 0)) * 50 * time.Millisecond
			if w, _ := m.Take(ctx, "k", 1, 20, 10, time.Hour); w < due || w > due+time.Microsecond {
				if off++; off <= 3 {
					t.Errorf("take %d waits %v, want %v to a microsecond after", i, w, due)
				}
			}
		}
		if off > 0 {
			t.Errorf("%d takes of 3000 off their time", off)
		}
	})
}

// adr-009-token-bucket-redis.md, acquire(tokens=n) and get_status: n
// tokens are taken at once or not at all, and the bucket's tokens are
// read without creating it.
func TestMemoryStoreTakesNAndReportsTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := NewMemoryStore()
		tokens := func() float64 {
			t.Helper()
			n, err := m.Tokens(ctx, "k", 2, 4)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := tokens(); n != 4 {
			t.Errorf("Tokens of a bucket never used = %v, want its burst of 4", n)
		}
		if len(m.buckets) != 0 {
			t.Errorf("Tokens created a bucket: %v", m.buckets)
		}
		if w, _ := m.Take(ctx, "k", 3, 2, 4, 0); w != 0 {
			t.Fatalf("taking 3 of a full 4 waits %v", w)
		}
		if n := tokens(); n != 1 {
			t.Errorf("after taking 3 of 4: %v tokens, want 1", n)
		}
		// 2 more: one is there, the other 500ms away at 2/s.
		if w, _ := m.Take(ctx, "k", 2, 2, 4, 0); w != 500*time.Millisecond {
			t.Errorf("taking 2 with 1 there = %v, want the 500ms until the second", w)
		}
		if n := tokens(); n != 1 {
			t.Errorf("a refused take of 2 took part of them: %v tokens left, want 1", n)
		}
		if w, _ := m.Take(ctx, "k", 2, 2, 4, time.Second); w != 500*time.Millisecond {
			t.Errorf("taking 2 within a second = %v, want them reserved in 500ms", w)
		}
		if n := tokens(); n != -1 {
			t.Errorf("with one token reserved ahead: %v tokens, want -1", n)
		}
		time.Sleep(2500 * time.Millisecond)
		if n := tokens(); n != 4 {
			t.Errorf("2.5s later at 2/s: %v tokens, want the bucket full at 4", n)
		}
	})
}

// A store keeps a breaker's state and cause as numbers: they must read
// back as the BreakerState and BreakerCause the transport reports.
func TestBreakerStateAndCauseRoundTripThroughAStore(t *testing.T) {
	for _, s := range []BreakerState{BreakerClosed, BreakerHalfOpen, BreakerOpen} {
		if got := store.State(s).String(); got != s.String() {
			t.Errorf("store.State(%v) = %q", s, got)
		}
	}
	c := BreakerCause{StatusCode: 429, Class: RateLimited, Detail: "slow down"}
	if got := causeFromStore(c.forStore()); got != c {
		t.Errorf("causeFromStore(forStore(%+v)) = %+v", c, got)
	}
}
