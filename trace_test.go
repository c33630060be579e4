package ratewise

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestTraceReportsWaitsAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "3"), answer(503, "Retry-After", "1"), answer(200))
		// Without learning: two refusals under the told limit would teach a
		// pace below it, which is not what this test is about.
		tr := New(s.mock(), WithRetry(RetryPolicy{Jitter: JitterNone, InitialDelay: time.Millisecond}),
			WithoutLearning(), WithLimit(Limit{Name: "api", Rate: 0.125, Burst: 1})) // a token every 8s, exact in floating point
		var mu sync.Mutex
		var events []string
		trace := &Trace{
			WaitStarted: func(w WaitInfo) {
				mu.Lock()
				event := fmt.Sprintf("wait %s %v before attempt %d of %s", w.Kind, w.Delay, w.Attempt, w.Endpoint)
				if w.Scope != "" {
					event += " in scope " + w.Scope
				}
				events = append(events, event)
				mu.Unlock()
			},
			RetryScheduled: func(r RetryInfo) {
				mu.Lock()
				events = append(events, fmt.Sprintf("retry %d/%d after %s in %v of %s", r.Attempt, r.MaxAttempts, r.Reason, r.Delay, r.Endpoint))
				mu.Unlock()
			},
		}
		var second []string
		ctx := WithEndpoint(WithCallTrace(context.Background(), trace), "comments")
		ctx = WithCallTrace(ctx, &Trace{RetryScheduled: func(r RetryInfo) { second = append(second, r.Reason) }})
		if status, err := callOnce(t, tr, ctx); status != 200 {
			t.Fatalf("call = %d, %v", status, err)
		}
		want := []string{
			"retry 1/5 after 429 in 3s of comments",
			"wait backoff 3s before attempt 2 of comments",
			"wait pacing 5s before attempt 2 of comments in scope api", // the bucket's next token: 8s after the first
			"retry 2/5 after 503 in 1s of comments",
			"wait backoff 1s before attempt 3 of comments",
			"wait pacing 7s before attempt 3 of comments in scope api",
		}
		if !slices.Equal(events, want) {
			t.Errorf("events:\n%q\nwant\n%q", events, want)
		}
		if !slices.Equal(second, []string{"429", "503"}) {
			t.Errorf("the second trace saw %q, want both retries: traces compose", second)
		}
	})
}

func TestTraceWaitKinds(t *testing.T) {
	for _, tt := range []struct {
		k    WaitKind
		want string
	}{{WaitBackoff, "backoff"}, {WaitPause, "pause"}, {WaitPacing, "pacing"}, {WaitConcurrency, "concurrency"}, {WaitBreaker, "breaker"}, {9, "WaitKind(9)"}} {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("WaitKind(%d).String() = %q, want %q", tt.k, got, tt.want)
		}
	}
}

// A call made with WithoutCallTrace reports to none of the traces its
// context was given: a base transport's own calls are not the outer
// call's. Other traces given after it are heard.
func TestWithoutCallTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200), answer(200)).mock())
		var outer, inner int
		ctx := WithCallTrace(context.Background(), &Trace{CallEnded: func(CallEndInfo) { outer++ }})
		if status, err := callOnce(t, tr, WithCallTrace(WithoutCallTrace(ctx), &Trace{CallEnded: func(CallEndInfo) { inner++ }})); status != 200 {
			t.Fatalf("call = %d, %v", status, err)
		}
		if outer != 0 || inner != 1 {
			t.Errorf("the outer trace heard %d calls, the inner one %d; want 0 and 1", outer, inner)
		}
		if got := WithoutCallTrace(context.Background()); got != context.Background() {
			t.Error("WithoutCallTrace of a context with no trace made a new one")
		}
	})
}

// A call's own trace hears the breaker changes its attempts caused, and
// only those: the next call, refused by the open breaker, changes nothing.
func TestCallTraceHearsTheBreakerChangeItCaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(503), answer(503)).mock(), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, FailFast: true}))
		var heard []string
		ctx := WithCallTrace(context.Background(), &Trace{BreakerStateChanged: func(b BreakerChange) {
			heard = append(heard, b.From.String()+" to "+b.To.String())
		}})
		if status, _ := callOnce(t, tr, ctx); status != 503 {
			t.Fatalf("the first call = %d, want the 503", status)
		}
		if !slices.Equal(heard, []string{"closed to open"}) {
			t.Errorf("the call that tripped the breaker heard %q, want closed to open", heard)
		}
		heard = nil
		if _, err := callOnce(t, tr, ctx); err == nil {
			t.Fatal("the second call went through an open breaker")
		}
		if len(heard) != 0 {
			t.Errorf("the refused call heard %q, want nothing: it changed nothing", heard)
		}
		// The probe's failure reopens the breaker: the probing call hears it.
		time.Sleep(DefaultBreakerCooldown)
		if status, _ := callOnce(t, tr, ctx); status != 503 {
			t.Fatalf("the probe = %d, want the 503", status)
		}
		if !slices.Contains(heard, "half-open to open") {
			t.Errorf("the probing call heard %q, want half-open to open", heard)
		}
	})
}
