package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
)

func TestOutageFallsBackOrFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	fallback, _ := newStore(t, srv, Options{Logger: logger, Recheck: 100 * time.Millisecond})
	closed, _ := newStore(t, srv, Options{OnFailure: FailClosed, Recheck: 100 * time.Millisecond})
	ctx := context.Background()
	if _, err := fallback.Take(ctx, "k", 1, 100, 10, 0); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	_, err := fallback.Take(ctx, "k", 1, 100, 10, 0)
	if err == nil || errors.Is(err, ratewise.ErrStoreUnavailable) {
		t.Fatalf("fallback store with Redis down: %v; want an error that does not fail closed", err)
	}
	start := time.Now()
	for range 20 { // within Recheck: Redis is not asked, no timeout is waited
		_, _ = fallback.Take(ctx, "k", 1, 100, 10, 0)
	}
	if took := time.Since(start); took > time.Second { // waiting for Redis, they would take 20 timeouts, 4s
		t.Errorf("20 takes during an outage took %v: each waited for Redis", took)
	}
	if _, err := closed.Take(ctx, "k", 1, 100, 10, 0); !errors.Is(err, ratewise.ErrStoreUnavailable) {
		t.Errorf("fail-closed store with Redis down: %v, want ErrStoreUnavailable", err)
	}
	if fallback.Outages() != 1 || fallback.Available() {
		t.Errorf("outages = %d, available %v; want one, down", fallback.Outages(), fallback.Available())
	}
	srv.Start()
	time.Sleep(150 * time.Millisecond) // past Recheck
	if _, err := fallback.Take(ctx, "k", 1, 100, 10, 0); err != nil {
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

// The calls that come while one call asks Redis whether an outage is
// over wait for its answer, rather than go on by the local state of each
// replica beside a Redis that is back: otherwise, after every outage,
// each replica's first calls would take its own bucket's burst on top of
// the fleet's. Real time: the recheck is timed by the clock, and Redis
// frozen for 30ms holds the call that asks.
func TestCallsDuringARecheckWaitForItsAnswer(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{Recheck: 50 * time.Millisecond, Timeout: time.Second})
	ctx := context.Background()
	srv.Stop()
	if _, err := s.Take(ctx, "k", 1, 100, 100, 0); err == nil {
		t.Fatal("a take with Redis stopped succeeded")
	}
	srv.Start()
	srv.Freeze()
	time.Sleep(60 * time.Millisecond) // past Recheck
	errs := make(chan error, 9)
	go func() { _, err := s.Take(ctx, "k", 1, 100, 100, 0); errs <- err }() // asks, and waits for the frozen Redis
	time.Sleep(10 * time.Millisecond)
	for range 8 {
		go func() { _, err := s.Take(ctx, "k", 1, 100, 100, 0); errs <- err }()
	}
	time.Sleep(20 * time.Millisecond)
	srv.Thaw()
	for range 9 {
		if err := <-errs; err != nil {
			t.Errorf("a take while Redis was rechecked: %v, want it to wait for the answer and take from Redis", err)
		}
	}
	if s.Outages() != 1 || !s.Available() {
		t.Errorf("outages %d, available %v; want 1, available", s.Outages(), s.Available())
	}
}

// A call that asks Redis whether an outage is over, and whose caller
// goes away before the answer, leaves the question open: a call waiting
// for its answer asks in its place, and takes from Redis once it answers.
// Real time, as above.
func TestARecheckWithNoAnswerIsAskedAgain(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{Recheck: 50 * time.Millisecond, Timeout: 2 * time.Second})
	srv.Stop()
	if _, err := s.Take(context.Background(), "k", 1, 100, 100, 0); err == nil {
		t.Fatal("a take with Redis stopped succeeded")
	}
	srv.Start()
	srv.Freeze()
	time.Sleep(60 * time.Millisecond) // past Recheck
	// The asker's caller gives it 30ms (a deadline, which go-redis
	// honours mid-call); the waiter comes 10ms in.
	askerCtx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	asker, waiter := make(chan error, 1), make(chan error, 1)
	go func() { _, err := s.Take(askerCtx, "k", 1, 100, 100, 0); asker <- err }()
	time.Sleep(10 * time.Millisecond)
	go func() { _, err := s.Take(context.Background(), "k", 1, 100, 100, 0); waiter <- err }()
	if err := <-asker; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the asking call whose caller went away: %v, want context.DeadlineExceeded", err)
	}
	time.Sleep(10 * time.Millisecond) // the waiter asks now, and waits for the frozen Redis
	srv.Thaw()
	if err := <-waiter; err != nil {
		t.Errorf("the call that waited: %v, want it to ask in the asker's place and take from Redis", err)
	}
	if s.Outages() != 1 || !s.Available() {
		t.Errorf("outages %d, available %v; want 1, available", s.Outages(), s.Available())
	}
}

func TestCallersContextIsNoOutage(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Take(ctx, "k", 1, 1, 1, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the caller's", err)
	}
	if s.Outages() != 0 || !s.Available() {
		t.Errorf("a cancelled caller counted as an outage")
	}
}

// Options.Timeout bounds a call to a Redis that stops answering, whether
// or not the client honours contexts (go-redis's ReadTimeout, 3s, would
// hold it otherwise), and the call counts as an outage.
func TestTimeoutBoundsACallToAStuckRedis(t *testing.T) {
	for _, honours := range []bool{false, true} {
		t.Run(fmt.Sprint("ContextTimeoutEnabled=", honours), func(t *testing.T) {
			srv := redistest.Start(t)
			client := goredis.NewClient(&goredis.Options{Addr: srv.Addr, ContextTimeoutEnabled: honours})
			defer client.Close()
			s := New(client, Options{Timeout: 100 * time.Millisecond, Recheck: time.Minute})
			caller := New(client, Options{Timeout: 5 * time.Second}) // far past the caller's context below
			ctx := context.Background()
			if _, err := s.Take(ctx, "k", 1, 10, 1, 0); err != nil {
				t.Fatal(err)
			}
			srv.Freeze()
			defer srv.Thaw() // before Close: the calls abandoned end
			start := time.Now()
			_, err := s.Take(ctx, "k", 1, 10, 1, 0)
			if took := time.Since(start); err == nil || took > 500*time.Millisecond {
				t.Errorf("Take with Redis stuck: %v after %v; want an error at the 100ms Timeout", err, took)
			}
			if s.Outages() != 1 || s.Available() {
				t.Errorf("outages %d, available %v; want the stuck Redis counted down", s.Outages(), s.Available())
			}
			// A caller's context shorter than Timeout ends the call at once.
			cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			start = time.Now()
			if _, err := caller.PausedUntil(cctx, "k"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
				t.Errorf("PausedUntil with a 20ms context: %v after %v; want the context's end", err, time.Since(start))
			}
		})
	}
}

// sleepHook holds every command for d, whatever its context: a client that
// does not honour contexts.
type sleepHook struct{ d time.Duration }

func (sleepHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h sleepHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		time.Sleep(h.d)
		return next(ctx, cmd)
	}
}

func (sleepHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// A call that ran past Options.Timeout is an outage even when the caller's
// context ended too: else every caller with a short deadline would wait
// on a stuck Redis, never skipping it.
func TestCallPastTimeoutIsAnOutageThoughTheCallerGaveUp(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Timeout: 50 * time.Millisecond, Recheck: time.Minute})
	client.AddHook(sleepHook{150 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _ = s.PausedUntil(ctx, "k")
	if s.Outages() != 1 || s.Available() {
		t.Fatalf("outages %d, available %v; want a call of 150ms past a 50ms Timeout counted", s.Outages(), s.Available())
	}
	start := time.Now()
	if _, err := s.PausedUntil(context.Background(), "k"); err == nil || time.Since(start) > 100*time.Millisecond { // asked, it would take the hook's 150ms
		t.Errorf("the next call: %v after %v; want it skipped until Recheck", err, time.Since(start))
	}
}
