package redis

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	rwstore "github.com/ratewise/ratewise/store"
)

// adr-009-token-bucket-redis.md, acquire(identifier, tokens) by a Celery
// task and get_status, with the bucket in Redis: what a task on one
// replica takes, another replica's request waits for, and every replica
// reports the shared bucket, one that sent nothing too.
func TestAcquireSharesTheRedisBucketAcrossTransports(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	store := New(client, Options{})
	api := startOK(t, 0)
	key := api.Listener.Addr().String()
	// At 2/s a token comes every 500ms: what the steps below take on a
	// loaded machine stays well within one.
	limit := ratewise.Limit{Name: "api", Rate: 2, Burst: 2, Store: store}
	a := ratewise.New(http.DefaultTransport, ratewise.WithLimit(limit))
	b := ratewise.New(http.DefaultTransport, ratewise.WithLimit(limit))
	defer b.CloseIdleConnections()
	ctx := context.Background()

	start := time.Now()
	if err := a.Acquire(ctx, "api", key, 2, 0); err != nil {
		t.Fatalf("a's Acquire of the full bucket's 2: %v", err)
	}
	if tokens, err := store.Tokens(ctx, rwstore.ScopeKey("api", key), 2, 2); err != nil || tokens >= 1 {
		t.Errorf("the store's bucket after a's Acquire of 2: %v tokens, %v; want less than 1", tokens, err)
	}
	if tokens := b.KeyStatus(key).Scopes[0].Tokens; tokens >= 1 {
		t.Errorf("b, which sent nothing, reports %v tokens, want the shared bucket's, less than 1", tokens)
	}
	if err := get(b, api.URL); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 499*time.Millisecond {
		t.Errorf("b's request after a took the burst ended %v after a's Acquire, want it to wait for the next token, 500ms on", took)
	}
	// a, refused at once, is told when the next 2 come.
	var le *ratewise.ClientLimitError
	if err := a.Acquire(ctx, "api", key, 2, 0); !errors.As(err, &le) || le.Reason != "fail-fast" ||
		le.RetryIn <= 0 || le.RetryIn > time.Second {
		t.Errorf("a's Acquire of 2 right after b's request: %v, want fail-fast within 1s", err)
	}
	assertAllExpire(t, client, "*")
}

// youtube-remediation-plan.md, Phase 2: the cooldown is visible to every
// backend instance: a pause one replica stored in Redis shows in
// another's Blocking and KeyStatus.
func TestPauseInRedisShowsInEveryTransport(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	store := New(client, Options{})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer api.Close()
	key := api.Listener.Addr().String()
	a := ratewise.New(http.DefaultTransport, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
		ratewise.WithPause(ratewise.PausePolicy{Store: store}))
	defer a.CloseIdleConnections()
	b := ratewise.New(http.DefaultTransport, ratewise.WithPause(ratewise.PausePolicy{Store: store}))
	if blocked, _ := b.Blocking(key); blocked {
		t.Fatal("b blocked before any refusal")
	}
	if err := get(a, api.URL); err != nil {
		t.Fatal(err)
	}
	if blocked, wait := b.Blocking(key); !blocked || wait < 29*time.Second || wait > 30*time.Second {
		t.Errorf("b after a's Retry-After: 30: Blocking = %v, %v; want true, about 30s", blocked, wait)
	}
	if paused := b.KeyStatus(key).PausedFor; paused < 29*time.Second || paused > 30*time.Second {
		t.Errorf("b's KeyStatus.PausedFor = %v, want about 30s", paused)
	}
}
