package redis

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// On a Redis Cluster of three masters, the store works as on one server:
// every key's state shares a slot (the key in braces), so buckets, pauses
// and the breaker's state machine hold, Admit answers a call's questions
// of one key together (one round trip for a call that needs no help, as
// on one server), says it cannot combine those of two keys, and two
// replicas given the store by WithStore keep one limit. Every key the
// store wrote expires.
func TestClusterKeepsEveryOperation(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	client := cluster.Client()
	defer client.Close()
	mem := New(client, Options{Prefix: "c:"})
	ctx := context.Background()

	tokenBucket(t, mem)
	breakerStateMachine(t, mem)

	now := time.Now()
	_ = mem.Pause(ctx, "api.test", now.Add(time.Second))
	_ = mem.Pause(ctx, "api.test", now.Add(100*time.Millisecond))
	if until, err := mem.PausedUntil(ctx, "api.test"); err != nil || until.UnixMilli() != now.Add(time.Second).UnixMilli() {
		t.Errorf("PausedUntil = %v, %v; want the later pause", until.Sub(now), err)
	}

	one := &store.AdmitAsk{Pause: "h", Bucket: store.ScopeKey("api", "h"), N: 1, Rate: 1, Burst: 1,
		Learned: store.ScopeKey("learned", "h"), Learn: store.LearnAsk{Take: true}}
	if a, err := mem.Admit(ctx, one); err != nil || !a.Took || a.Wait != 0 || !a.Learnt {
		t.Errorf("Admit on a cluster, one key: %+v, %v; want the token and the learned pace asked together", a, err)
	}
	two := &store.AdmitAsk{Pause: "h", Bucket: store.ScopeKey("all", ""), N: 1, Rate: 1, Burst: 1}
	if _, err := mem.Admit(ctx, two); !errors.Is(err, store.ErrCannotCombine) {
		t.Errorf("Admit on a cluster, two keys: %v, want ErrCannotCombine", err)
	}
	t.Run("round trips", func(t *testing.T) {
		hook := &roundTrips{}
		client.AddHook(hook)
		roundTripsPerCall(t, client, hook)
	})

	api := startOK(t, 0)
	replica := func() *ratewise.Transport {
		return ratewise.New(http.DefaultTransport, ratewise.WithStore(mem),
			ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 1}), ratewise.WithBreaker(ratewise.BreakerPolicy{}))
	}
	a, b := replica(), replica()
	defer a.CloseIdleConnections()
	defer b.CloseIdleConnections()
	start := time.Now()
	for i := range 10 {
		if err := get([]*ratewise.Transport{a, b}[i%2], api.URL); err != nil {
			t.Fatal(err)
		}
	}
	// Ten requests of one bucket of 20/s, burst 1: 450 ms at least,
	// however they are shared between the replicas.
	if took := time.Since(start); took < 440*time.Millisecond || api.requests.Load() != 10 {
		t.Errorf("two replicas sent %d requests in %v, want 10 in 450ms at least", api.requests.Load(), took)
	}

	err := client.ForEachMaster(ctx, func(ctx context.Context, master *goredis.Client) error {
		return reportKeysWithoutExpiry(t, ctx, master, "c:*")
	})
	if err != nil {
		t.Fatal(err)
	}
}
