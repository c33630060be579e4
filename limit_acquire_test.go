package ratewise

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// Tests of Transport.Acquire: turns of a limit scope taken for work that
// is not sent through the transport.

// timedAcquire calls tr.Acquire for host and says how long it took.
func timedAcquire(tr *Transport, ctx context.Context, scope string, n int, maxWait time.Duration) (time.Duration, error) {
	start := time.Now()
	err := tr.Acquire(ctx, scope, host, n, maxWait)
	return time.Since(start), err
}

// wantLimitError fails t unless err is a *ClientLimitError of scope with reason
// and retryIn.
func wantLimitError(t *testing.T, err error, scope string, reason LimitReason, retryIn time.Duration) {
	t.Helper()
	var le *ClientLimitError
	if !errors.As(err, &le) || le.Scope != scope || le.Reason != reason || le.RetryIn != retryIn {
		t.Errorf("err = %v, want a *ClientLimitError of %q, %s, RetryIn %v", err, scope, reason, retryIn)
	}
}

// adr-009-token-bucket-redis.md, acquire(tokens=2) by a Celery task and
// the API's requests under one limit: what the task takes, the requests
// wait for.
func TestAcquireSharesTheBucketWithRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 2}))
		if took, err := timedAcquire(tr, context.Background(), "api", 2, 0); err != nil || took != 0 {
			t.Fatalf("Acquire of a full bucket's 2: %v after %v, want nil at once", err, took)
		}
		start := time.Now()
		if _, err := callOnce(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("a request after Acquire took the burst of 2 at 1/s waited %v, want exactly 1s", took)
		}
		// And the other way round: the request took the token that came.
		wantLimitError(t, tr.Acquire(context.Background(), "api", host, 1, 0), "api", LimitFailFast, time.Second)
	})
}

// adr-009-token-bucket-redis.md, acquire(wait=False): returns at once,
// true when the tokens are there, false (here a *ClientLimitError saying when
// they come) without taking any when they are not.
func TestAcquireWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 2}))
		if err := tr.Acquire(context.Background(), "api", host, 1, 0); err != nil {
			t.Fatal(err)
		}
		took, err := timedAcquire(tr, context.Background(), "api", 2, 0)
		if took != 0 {
			t.Errorf("a refused Acquire took %v, want none", took)
		}
		wantLimitError(t, err, "api", LimitFailFast, time.Second)
		if tokens := tr.KeyStatus(host).Scopes[0].Tokens; tokens != 1 {
			t.Errorf("after a refused Acquire of 2 with 1 there: %v tokens, want the 1 untouched", tokens)
		}
		time.Sleep(time.Second)
		if err := tr.Acquire(context.Background(), "api", host, 2, 0); err != nil {
			t.Errorf("Acquire of 2 once they are there: %v", err)
		}
	})
}

// adr-009-token-bucket-redis.md, acquire(wait=True, timeout): a wait
// within the timeout returns when the tokens come; one past it returns
// at once, taking nothing.
func TestAcquireWaitsWithinMaxWait(t *testing.T) {
	tests := []struct {
		name    string
		limit   Limit
		ctx     func() (context.Context, context.CancelFunc)
		maxWait time.Duration
		// wantWait is how long Acquire of 2 on an empty bucket of 1/s
		// takes; 0 when it is refused at once.
		wantWait time.Duration
	}{
		{"fits maxWait", Limit{}, nil, 5 * time.Second, 2 * time.Second},
		{"fits maxWait exactly", Limit{}, nil, 2 * time.Second, 2 * time.Second},
		{"over maxWait", Limit{}, nil, time.Second, 0},
		{"over the Limit's MaxWait", Limit{MaxWait: time.Second}, nil, time.Minute, 0},
		{"past the context's deadline", Limit{}, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 2*time.Second) // the wait would end on it
		}, time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.limit
				l.Name, l.Rate, l.Burst = "api", 1, 2
				tr := New(newScript(answer(200)).mock(), WithLimit(l))
				if err := tr.Acquire(context.Background(), "api", host, 2, 0); err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if tt.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = tt.ctx()
					defer cancel()
				}
				took, err := timedAcquire(tr, ctx, "api", 2, tt.maxWait)
				if tt.wantWait > 0 {
					if err != nil || took != tt.wantWait {
						t.Errorf("Acquire of 2 on an empty bucket at 1/s: %v after %v, want nil after exactly %v", err, took, tt.wantWait)
					}
					return
				}
				if took != 0 {
					t.Errorf("a refused Acquire took %v, want none", took)
				}
				wantLimitError(t, err, "api", LimitMaxWait, 2*time.Second)
				// Nothing was taken: the first token is a second away.
				if took, err := timedAcquire(tr, context.Background(), "api", 1, time.Minute); err != nil || took != time.Second {
					t.Errorf("the next Acquire of 1: %v after %v, want nil after exactly 1s", err, took)
				}
			})
		})
	}
}

// adr-009-token-bucket-redis.md, acquire(wait=True): a worker shut down
// mid-wait stops waiting at once, and the token it was waiting for goes
// to the next caller.
func TestAcquireCancelledGivesTheTurnBack(t *testing.T) {
	for _, tt := range []struct {
		name  string
		limit Limit
	}{
		{"bucket", Limit{Rate: 1, Burst: 1}},
		{"spacing", Limit{MinSpacing: time.Second}},
		{"window", Limit{Burst: 1, Window: time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := tt.limit
				l.Name = "api"
				tr := New(newScript(answer(200)).mock(), WithLimit(l))
				start := time.Now()
				if err := tr.Acquire(context.Background(), "api", host, 1, 0); err != nil {
					t.Fatal(err)
				}
				next := time.Second // the window's start leaves it 5ms late
				if l.Window > 0 {
					next += limit.WindowMargin
				}
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(500*time.Millisecond, cancel)
				took, err := timedAcquire(tr, ctx, "api", 1, time.Minute)
				if !errors.Is(err, context.Canceled) || took != 500*time.Millisecond {
					t.Errorf("Acquire cancelled after 500ms: %v after %v, want context.Canceled at once", err, took)
				}
				if _, err := timedAcquire(tr, context.Background(), "api", 1, time.Minute); err != nil || time.Since(start) != next {
					t.Errorf("the next Acquire returned %v after the first, want %v: the cancelled one's turn back", time.Since(start), next)
				}
			})
		})
	}
}

// youtube-mcp-throttling-spec.md, throttle(fn) with minDelay 2s: AC9, the
// first call goes at once; AC2, ten calls are each 2s after the one
// before, 18s in all; AC1, a call 1s after a request waits the 1s left.
func TestAcquireSpacesCallsByMinSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "youtube", MinSpacing: 2 * time.Second, Key: Global}))
		start := time.Now()
		var at []time.Duration
		for range 10 {
			if err := tr.Acquire(context.Background(), "youtube", "", 1, time.Minute); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
		}
		for i, got := range at {
			if want := time.Duration(i) * 2 * time.Second; got != want {
				t.Errorf("call %d went at %v, want %v", i+1, got, want)
			}
		}
		time.Sleep(2 * time.Second)
		if _, err := callOnce(t, tr, context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if took, err := timedAcquire(tr, context.Background(), "youtube", 1, time.Minute); err != nil || took != time.Second {
			t.Errorf("a call 1s after a request: %v after %v, want nil after exactly the 1s left", err, took)
		}
		// Three turns at once are three gaps: the next call waits 6s.
		if err := tr.Acquire(context.Background(), "youtube", "", 3, time.Minute); err != nil || time.Since(start) != 24*time.Second {
			t.Fatalf("Acquire of 3: %v at %v, want nil at 24s, 2s after the last", err, time.Since(start))
		}
		if took, err := timedAcquire(tr, context.Background(), "youtube", 1, time.Minute); err != nil || took != 6*time.Second {
			t.Errorf("a call after 3 turns: %v after %v, want nil after exactly 6s", err, took)
		}
	})
}

// adr-009-token-bucket-redis.md, acquire(tokens=n) under a window of 5 per
// 10s: n starts are taken at once, when the window has room for all n.
func TestAcquireTakesNStartsOfAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "window", Burst: 5, Window: 10 * time.Second}))
		start := time.Now()
		if err := tr.Acquire(context.Background(), "window", host, 3, 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		// Two left: 3 more come when the first 3 leave, 10s (and the
		// margin) after they started.
		wantLimitError(t, tr.Acquire(context.Background(), "window", host, 3, 0), "window", LimitFailFast, 9*time.Second+limit.WindowMargin)
		if err := tr.Acquire(context.Background(), "window", host, 2, 0); err != nil {
			t.Fatal(err)
		}
		if tokens := tr.KeyStatus(host).Scopes[0].Tokens; tokens != 0 {
			t.Errorf("after 5 of 5 taken: %v may start, want 0", tokens)
		}
		// Cancelled while it waits, an Acquire of 3 gives back its 3 starts
		// and the 3 it pushed out of the window.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		if err := tr.Acquire(ctx, "window", host, 3, time.Minute); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		if err := tr.Acquire(context.Background(), "window", host, 2, time.Minute); err != nil || time.Since(start) != 10*time.Second+limit.WindowMargin {
			t.Fatalf("Acquire of 2 after the cancelled one: %v at %v, want nil at 10.005s, when 2 of the first 3 leave", err, time.Since(start))
		}
		// The third of the first 3 left at the same instant: one more
		// starts now, and the next when the 2 of 1s leave, a second on.
		if err := tr.Acquire(context.Background(), "window", host, 1, 0); err != nil {
			t.Errorf("Acquire of the fifth start: %v", err)
		}
		wantLimitError(t, tr.Acquire(context.Background(), "window", host, 1, 0), "window", LimitFailFast, time.Second)
	})
}

// adr-009-token-bucket-redis.md, acquire(identifier, tokens): what cannot
// be taken is said at once, naming what to do.
func TestAcquireRefusesWhatItCannotTake(t *testing.T) {
	base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody}}
	told := New(base, WithLimit(Limit{Name: "api", Rate: 1, Burst: 2}), WithLimit(Limit{Burst: 3, Window: time.Second}))
	tests := []struct {
		name  string
		tr    *Transport
		scope string
		n     int
		want  []string // in the error
	}{
		{"an unknown scope", told, "nope", 1, []string{`"nope"`, `"api", "limit 2"`}},
		{"the learned scope", New(base), LearnedScope, 1, []string{`"learned"`, "Adaptive", "responses"}},
		{"an adaptive scope", New(base, WithLimit(Limit{Name: "mine", Adaptive: true, Rate: 10})), "mine", 1, []string{`"mine"`, "Adaptive"}},
		{"n of 0", told, "api", 0, []string{"n (0)", "at least 1"}},
		{"n over a bucket's Burst", told, "api", 3, []string{"n (3)", `"api"`, "Burst (2)"}},
		{"n over a window's Burst", told, "limit 2", 4, []string{"n (4)", `"limit 2"`, "Burst (3)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tr.Acquire(context.Background(), tt.scope, host, tt.n, time.Minute)
			if err == nil || errors.Is(err, ErrLimited) || !strings.HasPrefix(err.Error(), "ratewise: ") {
				t.Fatalf("err = %v, want an error saying what is wrong", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to say %s", err, w)
				}
			}
		})
	}
}

// youtube-mcp-throttling-spec.md, §8 opt-out (YOUTUBE_MIN_DELAY=0): a
// scope that paces nothing has nothing to take, and n is not bounded by
// a Burst it does not use.
func TestAcquireFromAScopeThatPacesNothing(t *testing.T) {
	base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody}}
	for _, l := range []Limit{{Name: "slots", MaxConcurrent: 1}, {Name: "inf", Rate: rate.Inf}, {Name: "off"}} {
		tr := New(base, WithLimit(l))
		for range 3 {
			if err := tr.Acquire(context.Background(), l.Name, host, 100, 0); err != nil {
				t.Errorf("Acquire from %+v: %v, want nil", l, err)
			}
		}
	}
}

// adr-009-token-bucket-redis.md, "Queue Limit: 50 pending": a scope's
// MaxQueue counts the tasks waiting in Acquire with the requests.
func TestAcquireWaitersCountInMaxQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 1, MaxQueue: 1}))
		if err := tr.Acquire(context.Background(), "api", host, 1, 0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := tr.Acquire(context.Background(), "api", host, 1, time.Minute); err != nil {
				t.Errorf("the queued Acquire: %v", err)
			}
		})
		synctest.Wait()
		// The waiter holds the token of 1s: the next comes at 2s.
		_, err := callOnce(t, tr, context.Background())
		wantLimitError(t, err, "api", LimitMaxQueue, 2*time.Second)
		wantLimitError(t, tr.Acquire(context.Background(), "api", host, 1, time.Minute), "api", LimitMaxQueue, 2*time.Second)
		wg.Wait()
	})
}

// adr-009-token-bucket-redis.md, "Storage: Redis": a task on one
// transport and the requests of another given the same store take from
// one bucket, under the key the requests use.
func TestAcquireTakesFromTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		limit := Limit{Name: "api", Rate: 1, Burst: 2, Store: mem}
		a := New(newScript(answer(200)).mock(), WithLimit(limit))
		b := New(newScript(answer(200)).mock(), WithLimit(limit))
		if err := a.Acquire(context.Background(), "api", host, 2, 0); err != nil {
			t.Fatal(err)
		}
		if tokens, _ := mem.Tokens(context.Background(), store.ScopeKey("api", host), 1, 2); tokens != 0 {
			t.Errorf("the mem's bucket holds %v after Acquire of its 2, want 0", tokens)
		}
		start := time.Now()
		if _, err := callOnce(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("b's request after a's Acquire of the burst waited %v, want exactly 1s", took)
		}
		wantLimitError(t, a.Acquire(context.Background(), "api", host, 1, 0), "api", LimitFailFast, time.Second)
		if took, err := timedAcquire(a, context.Background(), "api", 1, time.Minute); err != nil || took != time.Second {
			t.Errorf("a's Acquire within a minute: %v after %v, want nil after exactly 1s", err, took)
		}
	})
}

// adr-009-token-bucket-redis.md, Redis down: Acquire does what a request
// does, the scope's own bucket standing in, or refused when the store
// fails closed.
func TestAcquireWhenTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		open := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 2, Store: failingStore{}}))
		if err := open.Acquire(context.Background(), "api", host, 2, 0); err != nil {
			t.Fatalf("Acquire with the mem down, failing open: %v", err)
		}
		wantLimitError(t, open.Acquire(context.Background(), "api", host, 1, 0), "api", LimitFailFast, time.Second)

		closed := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 2, Store: failingStore{closed: true}}))
		err := closed.Acquire(context.Background(), "api", host, 1, time.Minute)
		wantLimitError(t, err, "api", "store-unavailable", 0)
		if !errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("err = %v, want it to match ErrStoreUnavailable", err)
		}
	})
}

// youtube-mcp-throttling-spec.md, AC7: a call held 2000ms logs
// "Throttling: waiting 2000ms before next request", and the wait counts
// in the transport's and the context's stats as a request's does.
func TestAcquireWaitIsLoggedAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log bytes.Buffer
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "youtube", MinSpacing: 2 * time.Second}),
			WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
		ctx, stats := WithCallStats(context.Background())
		for range 2 {
			if err := tr.Acquire(ctx, "youtube", host, 1, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if got := stats.Waited(); got != 2*time.Second {
			t.Errorf("CallStats.Waited = %v, want 2s", got)
		}
		if got := tr.Stats().WaitsByKind["pacing"]; got.Count != 1 {
			t.Errorf("Stats pacing waits = %+v, want 1", got)
		}
		if !strings.Contains(log.String(), `msg="Throttling: waiting 2000ms before next request" event=rate_wait kind=pacing delay_ms=2000 attempt=1 key=api.example.com`) {
			t.Errorf("log = %q, want the 2000ms wait with its key", log.String())
		}
	})
}

// adr-009-token-bucket-redis.md, queue prioritization: a low-priority
// task leaves a Limit's Reserve to the others, as a low-priority request
// does, and may not ask for more than the rest at once.
func TestAcquireLowPriorityLeavesTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(Limit{Name: "api", Rate: 1, Burst: 3, Reserve: 2}))
		low := WithPriority(context.Background(), PriorityLow)
		if err := tr.Acquire(low, "api", host, 1, 0); err != nil {
			t.Fatalf("low priority, 3 tokens there, Reserve 2: %v", err)
		}
		wantLimitError(t, tr.Acquire(low, "api", host, 1, 0), "api", LimitFailFast, time.Second)
		if err := tr.Acquire(context.Background(), "api", host, 2, 0); err != nil {
			t.Fatalf("normal priority takes the reserve: %v", err)
		}
		if took, err := timedAcquire(tr, low, "api", 1, time.Minute); err != nil || took != 3*time.Second {
			t.Errorf("low priority on an empty bucket: %v after %v, want nil after exactly 3s, the Reserve refilled and one more", err, took)
		}
		err := tr.Acquire(low, "api", host, 2, time.Minute)
		if err == nil || errors.Is(err, ErrLimited) || !strings.Contains(err.Error(), "PriorityLow") {
			t.Errorf("low priority asking 2 of Burst 3 less Reserve 2: %v, want an error saying it never comes", err)
		}
	})
}
