package ratewise

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
)

// probeCase is a request that comes while a half-open breaker's probe is
// out: what the probe gets, the request's wait budget, and what comes of
// the request.
type probeCase struct {
	name   string
	probe  step          // the probe's answer, 2s after it is sent
	budget time.Duration // the waiting request's
	// sentAt is when the waiting request is sent, from the probe's send;
	// 0 when it is not. waited is what it waited. state and resetIn are
	// its *CircuitOpenError's, when it gets one.
	sentAt  time.Duration
	waited  time.Duration
	state   BreakerState // in the CircuitOpenError; BreakerClosed: the request is sent
	resetIn time.Duration
}

// assertProbeCase checks what came of the waiting request of tt, sent
// from probeSent, which ended with err.
func assertProbeCase(t *testing.T, tt probeCase, probeSent time.Time, sent []time.Time, stats *CallStats, err error) {
	t.Helper()
	var open *CircuitOpenError
	switch {
	case tt.state == BreakerClosed && err != nil:
		t.Errorf("%s: err = %v, want the request sent", tt.name, err)
	case tt.state != BreakerClosed && (!errors.As(err, &open) || open.State != tt.state || open.ResetIn != tt.resetIn):
		t.Errorf("%s: err = %v, want a CircuitOpenError %s resetting in %v", tt.name, err, tt.state, tt.resetIn)
	}
	switch {
	case tt.sentAt == 0 && len(sent) != 0:
		t.Errorf("%s: sent at %v, want it not sent", tt.name, sent[0].Sub(probeSent))
	case tt.sentAt != 0 && (len(sent) != 1 || sent[0].Sub(probeSent) != tt.sentAt):
		t.Errorf("%s: sent at %v, want once at %v", tt.name, offsetsFrom(probeSent, sent), tt.sentAt)
	}
	if got := stats.Waited(); got != tt.waited {
		t.Errorf("%s: Waited() = %v, want %v", tt.name, got, tt.waited)
	}
}

func offsetsFrom(start time.Time, times []time.Time) []time.Duration {
	out := make([]time.Duration, len(times))
	for i, at := range times {
		out[i] = at.Sub(start)
	}
	return out
}

// A request that finds the local breaker's probe out waits for its
// outcome: it goes when the probe closes the breaker, waits out the next
// cooldown when the probe fails and that fits its budget, and is refused
// when it does not, or when its budget ends before the probe's outcome.
func TestBreakerHalfOpenWaitsForTheProbe(t *testing.T) {
	tests := []probeCase{
		{name: "probe succeeds", probe: answer(200), budget: time.Minute,
			sentAt: 2 * time.Second, waited: 1500 * time.Millisecond},
		{name: "probe fails, the next cooldown fits", probe: answer(503), budget: 10 * time.Minute,
			sentAt: 5*time.Minute + 2*time.Second, waited: 5*time.Minute + 1500*time.Millisecond},
		{name: "probe fails, the next cooldown does not fit", probe: answer(503), budget: time.Minute,
			waited: 1500 * time.Millisecond, state: BreakerOpen, resetIn: 5 * time.Minute},
		{name: "budget ends before the outcome", probe: answer(200), budget: time.Second,
			waited: time.Second, state: BreakerHalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(503), tt.probe, answer(200))
				tr := breakerTransport(s.slowMock(2*time.Second), BreakerPolicy{ConsecutiveFailures: 1,
					Cooldown: time.Minute, Escalation: []time.Duration{5 * time.Minute}})
				_, _ = callOnce(t, tr, noWait()) // trips at 2s, for a minute
				time.Sleep(time.Minute)
				probeSent := time.Now()
				probe := goCallOnce(t, tr, noWait())
				time.Sleep(500 * time.Millisecond)
				var traced []WaitKind // the waiter's waits, as its trace saw them
				ctx := WithCallTrace(WithBudget(context.Background(), tt.budget),
					&Trace{WaitStarted: func(w WaitInfo) { traced = append(traced, w.Kind) }})
				ctx, stats := WithCallStats(ctx)
				_, err := callOnce(t, tr, ctx)
				<-probe
				if len(traced) == 0 || slices.ContainsFunc(traced, func(k WaitKind) bool { return k != WaitBreaker }) {
					t.Errorf("waits traced: %v, want breaker waits only", traced)
				}
				s.mu.Lock()
				var sent []time.Time
				for _, answered := range s.times[2:] {
					sent = append(sent, answered.Add(-2*time.Second)) // the server answers 2s after
				}
				s.mu.Unlock()
				assertProbeCase(t, tt, probeSent, sent, stats, err)
				if ws := tr.Stats().WaitsByKind["breaker"]; ws.Total != tt.waited {
					t.Errorf("breaker waits = %d totalling %v, want %v", ws.Count, ws.Total, tt.waited)
				}
			})
		})
	}
}

// Requests waiting for the probes go one probe at a time while more
// successes are needed to close, then all at once.
func TestBreakerHalfOpenWaitersTakeTurnsToProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503), answer(200))
		tr := breakerTransport(s.slowMock(time.Second), BreakerPolicy{ConsecutiveFailures: 1,
			HalfOpenProbes: 1, SuccessesToClose: 3})
		_, _ = callOnce(t, tr, noWait()) // trips at 1s
		time.Sleep(DefaultBreakerCooldown)
		start := time.Now()
		for i, err := range burst(t, tr, 10, context.Background) {
			if err != nil {
				t.Errorf("caller %d: %v, want it served once the breaker closes", i, err)
			}
		}
		s.mu.Lock()
		got := offsetsFrom(start, s.times[1:]) // answered, a second after each is sent
		s.mu.Unlock()
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
		for range 7 {
			want = append(want, 4*time.Second)
		}
		if !slices.Equal(got, want) {
			t.Errorf("sent at %v, want three probes one after another, then the 7 others at once (answered 1s after): %v", got, want)
		}
	})
}

// The shared breaker's equivalent: while another transport holds the
// probe, a request asks the store again, after 25ms, then 50ms, doubling
// to a second, as long as its budget lasts.
func TestSharedBreakerHalfOpenWaitsForTheProbe(t *testing.T) {
	// The probe ends at 2s; the waiting request, from 500ms, asks again at
	// 525ms, 575ms, 675ms, 875ms, 1.275s and 2.075s.
	tests := []probeCase{
		{name: "probe succeeds", probe: answer(200), budget: time.Minute,
			sentAt: 2075 * time.Millisecond, waited: 1575 * time.Millisecond},
		{name: "probe fails, the next cooldown fits", probe: answer(503), budget: 10 * time.Minute,
			sentAt: 5*time.Minute + 2*time.Second, waited: 5*time.Minute + 1500*time.Millisecond},
		{name: "probe fails, the next cooldown does not fit", probe: answer(503), budget: time.Minute,
			waited: 1575 * time.Millisecond, state: BreakerOpen, resetIn: 5*time.Minute - 75*time.Millisecond},
		// Asks at 525ms, ..., 1.275s, then with the 225ms left at 1.5s.
		{name: "budget ends before the outcome", probe: answer(200), budget: time.Second,
			waited: time.Second, state: BreakerHalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := NewMemoryStore()
				policy := BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute,
					Escalation: []time.Duration{5 * time.Minute}, Store: mem}
				rules := policy.Rules()
				_, _ = mem.BreakerFailed(context.Background(), host, false, store.Cause{}, &rules) // another replica trips it
				time.Sleep(time.Minute)
				a := breakerTransport(newScript(tt.probe).slowMock(2*time.Second), policy)
				waiting := newScript(answer(200))
				b := breakerTransport(waiting.mock(), policy)
				probeSent := time.Now()
				probe := goCallOnce(t, a, noWait())
				time.Sleep(500 * time.Millisecond)
				ctx, stats := WithCallStats(WithBudget(context.Background(), tt.budget))
				_, err := callOnce(t, b, ctx)
				<-probe
				waiting.mu.Lock()
				sent := slices.Clone(waiting.times)
				waiting.mu.Unlock()
				assertProbeCase(t, tt, probeSent, sent, stats, err)
			})
		})
	}
}

// A request waiting for the probe becomes the probe when the probe is
// given back unsent: its caller gave up while it was held in a cooldown.
func TestBreakerHalfOpenWaiterTakesAProbeGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithoutLearning(),
			WithPause(PausePolicy{Spread: time.Nanosecond}), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1}))
		_, _ = callOnce(t, tr, noWait()) // trips
		time.Sleep(DefaultBreakerCooldown)
		start := time.Now()
		tr.gate.Pause(context.Background(), host, start.Add(10*time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		probe := goCallOnce(t, tr, ctx) // the probe, held in the cooldown
		time.Sleep(time.Second)
		waiter := goCallOnce(t, tr, context.Background())
		time.Sleep(time.Second)
		cancel() // the probe is given back at 2s
		if err := <-probe; !errors.Is(err, context.Canceled) {
			t.Errorf("probe: %v, want its caller's cancellation", err)
		}
		if err := <-waiter; err != nil {
			t.Errorf("waiter: %v, want it to probe once the probe was given back", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.times) != 2 || s.times[1].Sub(start).Round(time.Millisecond) != 10*time.Second {
			t.Errorf("sent at %v after the cooldown, want the waiter alone, at the pause's end 10s", offsetsFrom(start, s.times[1:]))
		}
	})
}

func TestBreakerHalfOpenLetsExactlyTheProbesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		var mu sync.Mutex
		sent := 0
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			sent++
			failing := fail
			mu.Unlock()
			if failing {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			time.Sleep(time.Second) // the probes take a while
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 2, HalfOpenProbes: 2})
		for range 2 {
			_, _ = callOnce(t, tr, noWait())
		}
		mu.Lock()
		fail, sent = false, 0
		mu.Unlock()
		time.Sleep(DefaultBreakerCooldown)

		var wg sync.WaitGroup
		results := make(chan error, 10)
		for range 10 {
			wg.Go(func() {
				_, err := callOnce(t, tr, noWait())
				results <- err
			})
		}
		wg.Wait()
		close(results)
		var halfOpen, passed int
		for err := range results {
			var coe *CircuitOpenError
			switch {
			case err == nil:
				passed++
			case errors.As(err, &coe) && coe.State == BreakerHalfOpen:
				halfOpen++
			default:
				t.Errorf("unexpected error %v", err)
			}
		}
		if passed != 2 || halfOpen != 8 || sent != 2 {
			t.Errorf("%d passed, %d refused half-open, %d sent; want 2, 8, 2", passed, halfOpen, sent)
		}
	})
}

func TestBreakerProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := make(chan struct{})
		var mu sync.Mutex
		calls := 0
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			<-hang // the probe hangs
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute,
			Escalation: []time.Duration{time.Hour}, ProbeTimeout: 10 * time.Second})
		_, _ = callOnce(t, tr, noWait())
		time.Sleep(time.Minute)
		done := goCallOnce(t, tr, noWait())
		time.Sleep(10*time.Second + time.Millisecond)
		st := tr.KeyStatus(host).Breaker
		if st.State != BreakerOpen || st.ResetIn != time.Hour-time.Millisecond {
			t.Errorf("breaker %v, resets in %v, while the probe hangs past its timeout; want open for 1h", st.State, st.ResetIn)
		}
		close(hang)
		<-done
	})
}

func TestProbeTimeoutStartsWhenSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A 429 asking for 120s trips the breaker for 60s and pauses the key
		// for 120s: the probe waits 60s in the cooldown before it is sent,
		// longer than its timeout, and must not count as hanging.
		s := newScript(answer(429, "Retry-After", "120"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute,
				Escalation: []time.Duration{time.Hour}, ProbeTimeout: 10 * time.Second}))
		_, _ = callOnce(t, tr, context.Background())
		time.Sleep(time.Minute)
		if status, err := callOnce(t, tr, context.Background()); status != 200 {
			t.Fatalf("probe = %d, %v; want 200", status, err)
		}
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerClosed || st.Level != 0 {
			t.Errorf("breaker %v at level %d after a good probe that queued, want closed at 0", st.State, st.Level)
		}
	})
}

// TestBreakerHalfOpenProbesBelowSuccessesToClose: HalfOpenProbes bounds
// the probes in flight even when more successes are needed to close.
func TestBreakerHalfOpenProbesBelowSuccessesToClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var fail atomic.Bool
		fail.Store(true)
		var sent atomic.Int32
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			sent.Add(1)
			if fail.Load() {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			time.Sleep(time.Second)
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 2, HalfOpenProbes: 1, SuccessesToClose: 3})
		for range 2 {
			_, _ = callOnce(t, tr, noWait())
		}
		fail.Store(false)
		sent.Store(0)
		time.Sleep(DefaultBreakerCooldown)
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { _, _ = callOnce(t, tr, noWait()) })
		}
		wg.Wait()
		if n := sent.Load(); n != 1 {
			t.Errorf("%d probes sent at once, want HalfOpenProbes = 1", n)
		}
	})
}
