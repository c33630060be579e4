package ratewise

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Tests of what KeyStatus and Blocking read from a store: what the fleet
// knows, every transport reports.

// adr-009-token-bucket-redis.md, get_status(identifier): every replica
// reports the tokens of the shared bucket, one that sent nothing too.
func TestKeyStatusReportsTheSharedBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		for _, limit := range []Limit{
			{Name: "per host", Rate: 1, Burst: 5, Store: mem},
			{Name: "global", Rate: 1, Burst: 5, Store: mem, Key: Global},
		} {
			a := New(newScript(answer(200)).mock(), WithLimit(limit))
			b := New(newScript(answer(200)).mock(), WithLimit(limit))
			for range 3 {
				if _, err := callOnce(t, a, context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			for name, tr := range map[string]*Transport{"a, which sent 3": a, "b, which sent nothing": b} {
				if tokens := tr.KeyStatus(host).Scopes[0].Tokens; tokens != 2 {
					t.Errorf("%s: %s reports %v tokens, want the shared bucket's 2", limit.Name, name, tokens)
				}
			}
			time.Sleep(time.Second)
			if tokens := b.KeyStatus(host).Scopes[0].Tokens; tokens != 3 {
				t.Errorf("%s: a second later at 1/s, b reports %v tokens, want 3", limit.Name, tokens)
			}
		}
	})
}

// adr-009-token-bucket-redis.md, Redis down: while the store fails, the
// scope's own bucket stands in, and KeyStatus reports it.
func TestKeyStatusWithTheStoreDownReportsTheOwnBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 5, Store: failingStore{}}))
		for range 3 {
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if tokens := tr.KeyStatus(host).Scopes[0].Tokens; tokens != 2 {
			t.Errorf("with the mem down: %v tokens, want the own bucket's 2", tokens)
		}
	})
}

// youtube-remediation-plan.md, Phase 2: the cooldown is visible to every
// backend instance, and a batch stops at once rather than hit the API:
// a pause one transport stored shows in another's Blocking and
// KeyStatus, the later of its own and the store's winning.
func TestBlockingReportsAPauseAnotherTransportStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		a := New(newScript(answer(429, "Retry-After", "30")).mock(), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithPause(PausePolicy{Store: mem}))
		b := New(newScript(answer(200)).mock(), WithPause(PausePolicy{Store: mem}))
		if blocked, wait := b.Blocking(host); blocked || wait != 0 {
			t.Fatalf("b before any refusal: Blocking = %v, %v", blocked, wait)
		}
		if status, _ := callOnce(t, a, context.Background()); status != 429 {
			t.Fatalf("a = %d, want its 429", status)
		}
		time.Sleep(10 * time.Second)
		if blocked, wait := b.Blocking(host); !blocked || wait != 20*time.Second {
			t.Errorf("b 10s after a's Retry-After: 30: Blocking = %v, %v; want true, 20s", blocked, wait)
		}
		if paused := b.KeyStatus(host).PausedFor; paused != 20*time.Second {
			t.Errorf("b's KeyStatus.PausedFor = %v, want 20s", paused)
		}
		// b's own longer pause wins over the store's.
		b.gate.PauseLocal(host, time.Now().Add(time.Minute))
		if blocked, wait := b.Blocking(host); !blocked || wait != time.Minute {
			t.Errorf("b paused for a minute of its own: Blocking = %v, %v; want true, 1m", blocked, wait)
		}
		// Without a store, nothing of a's shows.
		alone := New(newScript(answer(200)).mock())
		if blocked, _ := alone.Blocking(host); blocked {
			t.Error("a transport with no mem is blocked by a pause it never saw")
		}
	})
}
