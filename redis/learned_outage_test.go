package redis

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/ratewisetest"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// syncBuffer is a log a store writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLearnedPaceThroughRedisOutages: three transports learn one loopback
// bucket together through Redis; Redis then stops answering for a second
// (SIGSTOP), and later restarts empty between two calls. No call fails;
// the outage is counted and logged once as begun and once as ended (the
// restart, which no call met, is none: the client dials the new server);
// while Redis is away each transport learns by itself; the state lost
// with Redis is learned there again from the next refusal, a pace a
// request can keep (not 0, not negative), which the transports take their
// turns from.
func TestLearnedPaceThroughRedisOutages(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	var log syncBuffer
	rs := New(client, Options{Recheck: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	api := ratewisetest.NewServer(ratewisetest.Config{Rate: 100, Burst: 5})
	defer api.Close()
	replicas := make([]*ratewise.Transport, 3)
	for i := range replicas {
		replicas[i] = ratewise.New(http.DefaultTransport, ratewise.WithStore(rs))
		defer replicas[i].CloseIdleConnections()
	}
	var failed atomic.Int64
	var firstErr atomic.Value
	// calls makes calls from six workers, two a replica, for d.
	calls := func(d time.Duration) {
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for w := range 6 {
			tr := replicas[w%len(replicas)]
			wg.Go(func() {
				for time.Now().Before(end) {
					req, _ := http.NewRequest(http.MethodGet, api.URL+"/items", nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = &ratewise.RateLimitError{StatusCode: resp.StatusCode}
						}
					}
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
				}
			})
		}
		wg.Wait()
	}
	key := store.ScopeKey(ratewise.LearnedScope, strings.TrimPrefix(api.URL, "http://"))
	learned := func() store.LearnAnswer {
		a, err := rs.Learn(context.Background(), key, &store.LearnAsk{})
		if err != nil {
			t.Fatalf("reading the learned state: %v", err)
		}
		return a
	}

	calls(time.Second)
	if a := learned(); !a.Paced || a.State.Rate <= 0 {
		t.Fatalf("after a second of calls: %+v, want the fleet paced", a)
	}
	srv.Freeze()
	calls(time.Second)
	srv.Thaw()
	calls(time.Second) // past Recheck: the fleet asks Redis again
	srv.Stop()
	srv.Start() // empty
	calls(2 * time.Second)

	if n := failed.Load(); n != 0 {
		t.Errorf("%d calls failed (the first: %v), want none", n, firstErr.Load())
	}
	if got := rs.Outages(); got != 1 {
		t.Errorf("outages = %d, want 1: the freeze", got)
	}
	text := log.String()
	if down, up := strings.Count(text, "store_down"), strings.Count(text, "store_up"); down != 1 || up != 1 {
		t.Errorf("the log says %d outages begun and %d ended, want 1 and 1:\n%s", down, up, text)
	}
	a := learned()
	if !a.Paced || a.State.Rate <= 0 {
		t.Errorf("after Redis restarted empty and two seconds of calls: %+v, want the fleet paced again", a)
	}
	tat, _ := client.HGet(context.Background(), rs.learnedKey(key), "tat").Float64()
	if rate := a.State.Rate; rate > 1e6 || tat < 0 {
		t.Errorf("the relearned state: rate %v, next turn at %v, want a pace to keep", rate, tat)
	}
	t.Logf("%+v; server %+v", a.State, api.Stats())
}
