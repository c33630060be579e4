package redis

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
)

// okServer answers 200 after delay, and counts requests and how many were
// in flight at once.
type okServer struct {
	*httptest.Server
	requests, inFlight, most atomic.Int64
}

func startOK(t *testing.T, delay time.Duration) *okServer {
	s := &okServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		n := s.inFlight.Add(1)
		for {
			m := s.most.Load()
			if n <= m || s.most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(delay)
		s.inFlight.Add(-1)
	}))
	t.Cleanup(s.Close)
	return s
}

func get(tr http.RoundTripper, url string) error {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Redis stopped mid-run and started again: with the store given to each
// policy, or to the transport by WithStore (whose attempts ask the
// breaker, the pause and the bucket in one script), calls go on with
// local state or fail closed as configured, the outage is counted once,
// and sharing resumes after Recheck.
func TestRedisStoppedMidRun(t *testing.T) {
	for _, tt := range []struct {
		name      string
		policy    Failure
		withStore bool
	}{{"fallback local", FallbackLocal, false}, {"fail closed", FailClosed, false},
		{"WithStore, fallback local", FallbackLocal, true}, {"WithStore, fail closed", FailClosed, true}} {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			client := srv.Client()
			defer client.Close()
			store := New(client, Options{OnFailure: tt.policy, Recheck: 100 * time.Millisecond})
			api := startOK(t, 0)
			opts := []ratewise.Option{
				ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 200, Burst: 10, Store: store}),
				ratewise.WithPause(ratewise.PausePolicy{Store: store}),
				ratewise.WithBreaker(ratewise.BreakerPolicy{Store: store})}
			if tt.withStore {
				opts = []ratewise.Option{ratewise.WithStore(store),
					ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 200, Burst: 10}),
					ratewise.WithBreaker(ratewise.BreakerPolicy{})}
			}
			tr := ratewise.New(http.DefaultTransport, opts...)
			defer tr.CloseIdleConnections()
			for range 10 {
				if err := get(tr, api.URL); err != nil {
					t.Fatal(err)
				}
			}
			srv.Stop()
			sentBefore := api.requests.Load()
			var failed int
			for range 10 {
				start := time.Now()
				err := get(tr, api.URL)
				if took := time.Since(start); took > time.Second {
					t.Errorf("a call took %v with Redis down", took)
				}
				switch {
				case err == nil:
				case tt.policy == FailClosed && errors.Is(err, ratewise.ErrStoreUnavailable):
					failed++
				default:
					t.Errorf("with Redis down: %v", err)
				}
			}
			sentDuring := api.requests.Load() - sentBefore
			if tt.policy == FallbackLocal && (failed != 0 || sentDuring != 10) {
				t.Errorf("fallback: %d failed, %d sent; want all 10 to complete on local state", failed, sentDuring)
			}
			if tt.policy == FailClosed && (failed != 10 || sentDuring != 0) {
				t.Errorf("fail closed: %d failed, %d sent; want all 10 refused, none sent", failed, sentDuring)
			}
			if store.Outages() != 1 {
				t.Errorf("outages = %d, want 1", store.Outages())
			}
			srv.Start()
			time.Sleep(150 * time.Millisecond) // past Recheck
			// The store asks Redis again within Recheck of a call; a loaded
			// machine may take longer to have redis-server answer: calls
			// go on, and the bucket must be back in Redis within seconds.
			bucket := "rate:ratewise:bucket:api:{" + api.Listener.Addr().String() + "}"
			for deadline := time.Now().Add(5 * time.Second); ; {
				if err := get(tr, api.URL); err != nil && tt.policy == FallbackLocal {
					t.Errorf("after Redis came back: %v", err)
				}
				if store.Available() && client.Exists(context.Background(), bucket).Val() == 1 {
					break
				}
				if time.Now().After(deadline) {
					keys := client.Keys(context.Background(), "*").Val()
					t.Fatalf("5 s after Redis came back: available %v, keys %v; want the bucket in Redis", store.Available(), keys)
				}
				time.Sleep(50 * time.Millisecond)
			}
			for range 5 {
				if err := get(tr, api.URL); err != nil {
					t.Errorf("after Redis came back: %v", err)
				}
			}
			assertAllExpire(t, client, "*")
		})
	}
}

func TestSharedBreakerDoesNotSerializeCalls(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	store := New(client, Options{})
	api := startOK(t, 100*time.Millisecond)
	// Without learning: a key's slow start, which opens up one more in
	// flight for each success, is not the breaker's doing.
	tr := ratewise.New(http.DefaultTransport, ratewise.WithoutLearning(), ratewise.WithBreaker(ratewise.BreakerPolicy{Store: store}))
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	start := time.Now()
	for range 50 {
		wg.Go(func() {
			if err := get(tr, api.URL); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if most := api.most.Load(); most < 45 {
		t.Errorf("at most %d calls in flight at once, want nearly all 50: the shared breaker serializes them", most)
	}
	// 50 one at a time would take 5s.
	if took > 2*time.Second {
		t.Errorf("50 concurrent calls of 100ms took %v", took)
	}
	t.Logf("50 calls of 100ms through a shared breaker: %v, %d at once", took.Round(time.Millisecond), api.most.Load())
}

// takeCounter counts a store's Take calls.
type takeCounter struct {
	*Store
	takes atomic.Int64
}

func (c *takeCounter) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	c.takes.Add(1)
	return c.Store.Take(ctx, key, n, r, burst, maxWait)
}

// Waiters for a token kept in Redis each reserve their turn and ask once,
// rather than all waking at each refill to ask again.
func TestSharedLimitWaitersAskRedisOnce(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	store := &takeCounter{Store: New(client, Options{})}
	api := startOK(t, 0)
	tr := ratewise.New(http.DefaultTransport, ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 40, Burst: 1, Store: store}))
	defer tr.CloseIdleConnections()
	start := time.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := get(tr, api.URL); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if n := store.takes.Load(); n != 20 {
		t.Errorf("20 admissions asked Redis %d times, want once each", n)
	}
	if took < 450*time.Millisecond {
		t.Errorf("20 requests at 40/s took %v, want 475ms at least", took)
	}
}

// BenchmarkRedisAdmission measures one request's admission through a
// limit kept in Redis on loopback: a Take, the round trip it costs.
func BenchmarkRedisAdmission(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	defer client.Close()
	store := New(client, Options{})
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		start := time.Now()
		// A bucket per request: every take is granted, as an admission
		// under the limit is.
		if _, err := store.Take(ctx, "bench", 1, 1e9, 1<<30, 0); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
		i++
	}
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	if n := len(durations); n > 0 {
		b.ReportMetric(float64(durations[n/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(durations[n*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkRedisTransport is a whole call through a transport whose limit,
// cooldown and breaker are kept in Redis, against a loopback server.
func BenchmarkRedisTransport(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	defer client.Close()
	store := New(client, Options{})
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer api.Close()
	for _, bc := range []struct {
		name string
		tr   *ratewise.Transport
	}{
		{"local", ratewise.New(http.DefaultTransport, ratewise.WithLimit(ratewise.Limit{Rate: 1e9, Burst: 1 << 30}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{}))},
		{"redis", ratewise.New(http.DefaultTransport, ratewise.WithLimit(ratewise.Limit{Rate: 1e9, Burst: 1 << 30, Store: store}),
			ratewise.WithPause(ratewise.PausePolicy{Store: store}), ratewise.WithBreaker(ratewise.BreakerPolicy{Store: store}))},
		// The same, shared by WithStore: the breaker, the pause and the
		// bucket asked in one script.
		{"redis-withstore", ratewise.New(http.DefaultTransport, ratewise.WithStore(store),
			ratewise.WithLimit(ratewise.Limit{Rate: 1e9, Burst: 1 << 30}), ratewise.WithBreaker(ratewise.BreakerPolicy{}))},
		{"redis-withstore-nobreaker", ratewise.New(http.DefaultTransport, ratewise.WithStore(store),
			ratewise.WithLimit(ratewise.Limit{Rate: 1e9, Burst: 1 << 30}))},
		{"local-nobreaker", ratewise.New(http.DefaultTransport, ratewise.WithLimit(ratewise.Limit{Rate: 1e9, Burst: 1 << 30}))},
		// The defaults, alone and sharing their pause and their learned
		// pace through WithStore: one script a call.
		{"defaults", ratewise.New(http.DefaultTransport)},
		{"defaults-withstore", ratewise.New(http.DefaultTransport, ratewise.WithStore(store))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := get(bc.tr, api.URL); err != nil {
					b.Fatal(err)
				}
			}
			bc.tr.CloseIdleConnections()
		})
	}
	// One loopback round trip to Redis, for scale: what a store adds to a
	// call (redis-withstore less local, defaults-withstore less defaults)
	// is about one.
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := client.Ping(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
