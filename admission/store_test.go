package admission

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/store"
)

// downStore is a MemoryStore that can be taken down: its calls then fail,
// closed (wrapping ErrStoreUnavailable) or not.
type downStore struct {
	*ratewise.MemoryStore
	closed bool
	down   atomic.Bool
	calls  atomic.Int64
}

func (s *downStore) err() error {
	s.calls.Add(1)
	if !s.down.Load() {
		return nil
	}
	if s.closed {
		return errors.Join(ratewise.ErrStoreUnavailable, errors.New("connection refused"))
	}
	return errors.New("connection refused")
}

func (s *downStore) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.MemoryStore.Take(ctx, key, n, r, burst, maxWait)
}

func (s *downStore) TakeCounted(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, float64, error) {
	if err := s.err(); err != nil {
		return 0, 0, err
	}
	return s.MemoryStore.TakeCounted(ctx, key, n, r, burst, maxWait)
}

func (s *downStore) Tokens(ctx context.Context, key string, r rate.Limit, burst int) (float64, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.MemoryStore.Tokens(ctx, key, r, burst)
}

func (s *downStore) Give(ctx context.Context, key string, n int, r rate.Limit, burst int) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.MemoryStore.Give(ctx, key, n, r, burst)
}

// plainStore is a store.Buckets that does not count as it takes: the
// handler asks its Tokens apart.
type plainStore struct{ m *ratewise.MemoryStore }

func (s plainStore) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	return s.m.Take(ctx, key, n, r, burst, maxWait)
}
func (s plainStore) Tokens(ctx context.Context, key string, r rate.Limit, burst int) (float64, error) {
	return s.m.Tokens(ctx, key, r, burst)
}
func (s plainStore) Give(ctx context.Context, key string, n int, r rate.Limit, burst int) error {
	return s.m.Give(ctx, key, n, r, burst)
}

// adr-009, criterion "shared by a fleet": two replicas given one store
// hold one limit together, per client and in all, and publish the
// shared counts, whether the store counts as it takes or not.
func TestReplicasOnOneStoreHoldOneLimit(t *testing.T) {
	for _, counting := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			mem := ratewise.NewMemoryStore()
			var shared store.Buckets = mem
			if !counting {
				shared = plainStore{mem}
			}
			ip, global := adrPerIP(), adrGlobal()
			ip.Store, global.Store = shared, shared
			a := newHandler(t, WithLimit(ip), WithLimit(global))
			b := newHandler(t, WithLimit(ip), WithLimit(global))
			var got []string
			for i := range 6 {
				h := a
				if i%2 == 1 {
					h = b
				}
				got = append(got, fields(serve(h, "192.0.2.1:1", "/")))
			}
			const policy = `"ip";q=5;w=30, "global";q=20;w=12`
			want := []string{
				`200 policy=` + policy + ` rl="ip";r=4;t=6, "global";r=19;t=1 x=5/4/6 retry=`,
				`200 policy=` + policy + ` rl="ip";r=3;t=12, "global";r=18;t=2 x=5/3/12 retry=`,
				`200 policy=` + policy + ` rl="ip";r=2;t=18, "global";r=17;t=2 x=5/2/18 retry=`,
				`200 policy=` + policy + ` rl="ip";r=1;t=24, "global";r=16;t=3 x=5/1/24 retry=`,
				`200 policy=` + policy + ` rl="ip";r=0;t=30, "global";r=15;t=3 x=5/0/30 retry=`,
				`429 policy=` + policy + ` rl="ip";r=0;t=30 x=5/0/30 retry=6`, // the store's later scope is not asked
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("counting %v, request %d:\n got %s\nwant %s", counting, i+1, got[i], want[i])
				}
			}
			if st := b.Status(context.Background(), "192.0.2.1"); !st.Scopes[0].Shared || st.Scopes[0].Tokens != 0 || st.Scopes[1].Tokens != 15 {
				t.Errorf("counting %v: the status another replica reports = %+v; want the shared buckets", counting, st)
			}
		})
	}
}

// A queued request takes its turn from the store's bucket, which reserves
// it; when its client goes away, the turn goes back to the store.
func TestSharedQueueGivesTheTurnBackToTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := ratewise.NewMemoryStore()
		l := Limit{Name: "q", Rate: 1, Burst: 1, Key: ratewise.Global, MaxWait: 10 * time.Second, Store: mem}
		a, b := newHandler(t, WithLimit(l)), newHandler(t, WithLimit(l))
		start := time.Now()
		var wg sync.WaitGroup
		var first, gone, next answer
		serveAsync(a, context.Background(), "192.0.2.1:1", start, &first, &wg)
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		serveAsync(a, ctx, "192.0.2.2:1", start, &gone, &wg)
		synctest.Wait()
		cancel()
		synctest.Wait()
		serveAsync(b, context.Background(), "192.0.2.3:1", start, &next, &wg)
		wg.Wait()
		if first.code != 200 || gone.code != 503 || next.code != 200 || next.at != time.Second {
			t.Errorf("first %d, cancelled %d, next %d after %v; want 200, 503, then 200 on the other replica after 1s, the turn given back",
				first.code, gone.code, next.code, next.at)
		}
	})
}

// adr-009, criterion "when Redis is down the middleware follows the
// store's policy, counted and logged once per outage": a store that
// falls back lets this process's own buckets stand in; one that fails
// closed gets 503s. Either way the outage is logged when it starts and
// when it ends, once.
func TestStoreOutageFallsBackOrFailsClosed(t *testing.T) {
	for _, closed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			mem := &downStore{MemoryStore: ratewise.NewMemoryStore(), closed: closed}
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			h := newHandler(t, WithLimit(Limit{Name: "ip", Rate: perMinute(10), Burst: 2, Store: mem}), WithLogger(logger))
			if rec := serve(h, "192.0.2.1:1", "/"); rec.Code != 200 {
				t.Fatalf("closed %v, with the mem up: %s", closed, fields(rec))
			}
			mem.down.Store(true)
			var codes []int
			for range 4 {
				codes = append(codes, serve(h, "192.0.2.1:1", "/").Code)
			}
			want := []int{200, 200, 429, 429} // the local bucket, full, stands in
			if closed {
				want = []int{503, 503, 503, 503}
			}
			if !equal(codes, want) {
				t.Errorf("closed %v, with the mem down: %v, want %v", closed, codes, want)
			}
			rec := serve(h, "192.0.2.1:1", "/")
			if closed {
				if got := fields(rec); got != `503 policy= rl= x=// retry=1` || !strings.Contains(rec.Body.String(), `"violated-policies":["ip"]`) ||
					!strings.Contains(rec.Body.String(), "temporary-reduced-capacity") {
					t.Errorf("a fail-closed answer: %s %s", got, rec.Body)
				}
			}
			mem.down.Store(false)
			serve(h, "192.0.2.1:1", "/")
			mem.down.Store(true)
			serve(h, "192.0.2.1:1", "/")
			st := h.Stats().Scopes[0]
			if st.StoreOutages != 2 {
				t.Errorf("closed %v: %d outages counted, want 2", closed, st.StoreOutages)
			}
			if wantFallbacks := int64(6); !closed && st.StoreFallbacks != wantFallbacks {
				t.Errorf("closed %v: %d fallbacks, want %d", closed, st.StoreFallbacks, wantFallbacks)
			}
			if closed && st.Refused[ReasonStoreUnavailable] != 6 {
				t.Errorf("closed %v: refused %v, want 6 for mem-unavailable", closed, st.Refused)
			}
			if down, up := strings.Count(logs.String(), "event=admission_store_down"), strings.Count(logs.String(), "event=admission_store_up"); down != 2 || up != 1 {
				t.Errorf("closed %v: logged %d outages and %d ends, want 2 and 1:\n%s", closed, down, up, logs.String())
			}
		})
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
