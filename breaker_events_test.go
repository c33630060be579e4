package ratewise

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	"github.com/ratewise/ratewise/store"
)

// slowMock is s.mock whose every answer takes latency: the requests of a
// burst are all in flight before the first answer is seen.
func (s *script) slowMock(latency time.Duration) *httpmock.MockTransport {
	mt := httpmock.NewMockTransport()
	mt.RegisterNoResponder(httpmock.Responder(s.respond).Delay(latency))
	return mt
}

// burst sends n calls at once through tr, each with a context of ctx(),
// and returns their errors.
func burst(t *testing.T, tr *Transport, n int, ctx func() context.Context) []error {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = callOnce(t, tr, ctx()) })
	}
	wg.Wait()
	return errs
}

// The refusals of one burst are one rate-limit event: they count once
// toward the breaker. Network errors and 5xx count each, as a server that
// is down fails every request by itself.
func TestBreakerCountsABurstOfRefusalsOnce(t *testing.T) {
	tests := []struct {
		name     string
		give     step
		failures uint32 // counted after a burst of 10
		state    BreakerState
	}{
		{name: "429", give: answer(429, "Retry-After", "1"), failures: 1, state: BreakerClosed},
		{name: "429 without a hint", give: answer(429), failures: 1, state: BreakerClosed},
		{name: "503 with Retry-After", give: answer(503, "Retry-After", "1"), failures: 1, state: BreakerClosed},
		{name: "500", give: answer(500), state: BreakerOpen},
		{name: "connection reset", give: step{err: errReset}, state: BreakerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.give)
				tr := breakerTransport(s.slowMock(100*time.Millisecond), BreakerPolicy{ConsecutiveFailures: 5})
				burst(t, tr, 10, noWait)
				st := tr.KeyStatus(host).Breaker
				if st.State != tt.state || st.State == BreakerClosed && st.ConsecutiveFailures != tt.failures {
					t.Errorf("breaker after a burst of 10 = %v with %d failures, want %v with %d",
						st.State, st.ConsecutiveFailures, tt.state, tt.failures)
				}
				if s.calls() != 10 {
					t.Errorf("%d sent, want the 10 of the burst", s.calls())
				}
			})
		})
	}
}

// Refusals that go on while every caller honours the server's hint are
// what open the breaker: 10 callers refused together, each retrying after
// the Retry-After, make one event a round, and the fifth round opens it.
func TestBreakerOpensOnRefusalsThatPersist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		tr := New(s.slowMock(100*time.Millisecond),
			WithRetry(RetryPolicy{MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: time.Second, Jitter: JitterNone}),
			WithPause(PausePolicy{Off: true}), WithoutLearning(), WithBreaker(BreakerPolicy{}))
		start := time.Now()
		for i, err := range burst(t, tr, 10, context.Background) {
			if err != nil {
				t.Errorf("caller %d: %v, want its last 429", i, err)
			}
		}
		// Rounds sent at 0, 1.1s, ..., 4.4s; the fifth is refused at 4.5s.
		if took := time.Since(start); took != 4500*time.Millisecond {
			t.Errorf("5 rounds took %v, want 4.5s", took)
		}
		st := tr.KeyStatus(host).Breaker
		if st.State != BreakerOpen || st.ResetIn != DefaultBreakerCooldown {
			t.Fatalf("breaker after 5 rounds = %v resetting in %v, want open for the 60s cooldown", st.State, st.ResetIn)
		}
		var open *CircuitOpenError
		if _, err := callOnce(t, tr, noWait()); !errors.As(err, &open) || open.Failures != 5 {
			t.Errorf("next call: %v, want the breaker open after 5 events", err)
		}
		if s.calls() != 50 {
			t.Errorf("%d sent, want 10 callers × 5 attempts", s.calls())
		}
	})
}

// A request sent after a refusal was seen, refused again after that
// refusal's second, is a new event even while older requests of the
// first burst are still in flight; and those older ones stay siblings.
func TestBreakerEventIsWhenSentNotWhenAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refuse := httpmock.NewStringResponder(http.StatusTooManyRequests, "slow down")
		mt := httpmock.NewMockTransport()
		mt.RegisterResponder(http.MethodGet, "https://api.example.com/fast", refuse.Delay(time.Second))
		mt.RegisterResponder(http.MethodGet, "https://api.example.com/slow", refuse.Delay(3*time.Second))
		tr := breakerTransport(mt, BreakerPolicy{ConsecutiveFailures: 3})
		get := func(path string) {
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		var wg sync.WaitGroup
		wg.Go(func() { get("/slow") }) // sent at 0, refused at 3s: a sibling of the first
		wg.Go(func() { get("/slow") })
		get("/fast") // sent at 0, refused at 1s: the first event
		get("/fast") // sent at 1s, refused at 2s: the second
		wg.Wait()
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerClosed || st.ConsecutiveFailures != 2 {
			t.Errorf("breaker = %v with %d failures, want closed with 2: the slow siblings count nothing", st.State, st.ConsecutiveFailures)
		}
	})
}

// An event lasts as long as the server's hint asks, and at least a
// second: a refusal within it, of a request that did not wait the hint
// out, is not a new event.
func TestBreakerEventLastsItsHint(t *testing.T) {
	tests := []struct {
		name  string
		give  step
		after time.Duration // the second request is sent this long after the first refusal
		want  uint32        // failures counted
	}{
		{name: "within Retry-After: 3", give: answer(429, "Retry-After", "3"), after: 2 * time.Second, want: 1},
		{name: "after Retry-After: 3", give: answer(429, "Retry-After", "3"), after: 3 * time.Second, want: 2},
		{name: "no hint, within a second", give: answer(429), after: 900 * time.Millisecond, want: 1},
		{name: "no hint, after a second", give: answer(429), after: time.Second, want: 2},
		{name: "Retry-After: 0, after a second", give: answer(429, "Retry-After", "0"), after: time.Second, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := breakerTransport(newScript(tt.give).mock(), BreakerPolicy{})
				_, _ = callOnce(t, tr, noWait())
				time.Sleep(tt.after)
				_, _ = callOnce(t, tr, noWait())
				if got := tr.KeyStatus(host).Breaker.ConsecutiveFailures; got != tt.want {
					t.Errorf("failures = %d, want %d", got, tt.want)
				}
			})
		})
	}
}

// Shared breakers count events too: the siblings of a burst are not told
// to the store, and each transport's events count across the fleet.
func TestSharedBreakerCountsABurstOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		policy := BreakerPolicy{ConsecutiveFailures: 2, Store: mem}
		rules := policy.Rules()
		s := newScript(answer(429))
		a := breakerTransport(s.slowMock(100*time.Millisecond), policy)
		b := breakerTransport(s.slowMock(100*time.Millisecond), policy)
		burst(t, a, 10, noWait)
		if sb, _ := mem.BreakerAdmit(context.Background(), host, &rules); sb.State != store.Closed || sb.Failures != 1 {
			t.Fatalf("shared breaker after a burst of 10 = %+v, want closed with 1 failure", sb)
		}
		burst(t, b, 10, noWait) // sent after a's event was seen: the second
		if sb, _ := mem.BreakerAdmit(context.Background(), host, &rules); sb.State != store.Open {
			t.Errorf("shared breaker after a second burst = %+v, want open", sb)
		}
	})
}

// An attempt's place in an event is when it is sent, not when the breaker
// let it in: one that queued in a limit until after a refusal was seen,
// and is refused, is a new event.
func TestBreakerEventCountsFromTheSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		// One every 2s: the second call passes the breaker at 0 and is
		// sent at 2s, after the first's refusal at 100ms.
		tr := New(s.slowMock(100*time.Millisecond), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithPause(PausePolicy{Off: true}), WithLimit(Limit{Rate: 0.5, Burst: 1}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 5}))
		burst(t, tr, 2, context.Background)
		if got := tr.KeyStatus(host).Breaker.ConsecutiveFailures; got != 2 {
			t.Errorf("failures = %d, want 2: the second was sent after the first refusal was seen", got)
		}
	})
}
