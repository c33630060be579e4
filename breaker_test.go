package ratewise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const host = "api.example.com"

// breakerTransport sends each request once, so that each call is one
// breaker outcome, with the pause gate off so that only the breaker
// holds requests back.
func breakerTransport(base http.RoundTripper, p BreakerPolicy) *Transport {
	return New(base, WithRetry(RetryPolicy{MaxAttempts: 1}), WithPause(PausePolicy{Off: true}), WithoutLearning(), WithBreaker(p))
}

// callOnce sends one GET with ctx and returns its status, or its error.
func callOnce(t *testing.T, tr *Transport, ctx context.Context) (int, error) {
	t.Helper()
	resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
	if err != nil {
		return 0, err
	}
	readAll(t, resp)
	return resp.StatusCode, nil
}

// goCallOnce is callOnce in a goroutine of its own; the channel gets its
// error, nil for a response, when it returns.
func goCallOnce(t *testing.T, tr *Transport, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := callOnce(t, tr, ctx)
		done <- err
	}()
	return done
}

// noWait is a context whose calls may not wait at all.
func noWait() context.Context { return WithBudget(context.Background(), 0) }

func TestBreakerOpensAfterConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		tr := breakerTransport(s.mock(), BreakerPolicy{})
		for i := range 5 {
			if i > 0 {
				time.Sleep(time.Second) // a refusal a second: each is an event
			}
			if status, err := callOnce(t, tr, noWait()); status != 429 {
				t.Fatalf("call %d = %d, %v; want the 429", i, status, err)
			}
		}
		_, err := callOnce(t, tr, noWait())
		var coe *CircuitOpenError
		if !errors.As(err, &coe) || !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("sixth call: err = %v, want a *CircuitOpenError", err)
		}
		if coe.Key != host || coe.State != BreakerOpen || coe.ResetIn != DefaultBreakerCooldown || coe.Failures != 5 {
			t.Errorf("CircuitOpenError = %+v, want key %s, open, 60s, 5 failures", *coe, host)
		}
		if s.calls() != 5 {
			t.Errorf("server calls = %d, want 5: nothing sent while open", s.calls())
		}
		js, _ := json.Marshal(coe)
		if want := `{"error":"circuit_open","key":"api.example.com","state":"open","reset_in_seconds":60,"failures":5}`; string(js) != want {
			t.Errorf("JSON = %s, want %s", js, want)
		}
		if blocked, d := tr.Blocking(host); !blocked || d != DefaultBreakerCooldown {
			t.Errorf("Blocking = %v, %v; want true, 60s", blocked, d)
		}
	})
}

func TestBreakerWaitsForResetWithinBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503), answer(503), answer(503), answer(503), answer(503), answer(200))
		tr := breakerTransport(s.mock(), BreakerPolicy{})
		for range 5 {
			_, _ = callOnce(t, tr, context.Background())
		}
		start := time.Now()
		if status, err := callOnce(t, tr, context.Background()); status != 200 {
			t.Fatalf("call after the trip = %d, %v; want 200 once the breaker lets a probe through", status, err)
		}
		if waited := time.Since(start); waited != DefaultBreakerCooldown {
			t.Errorf("waited %v, want the 60s cooldown", waited)
		}
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerClosed {
			t.Errorf("breaker %v after a good probe, want closed", st.State)
		}
	})
}

func TestBreakerCountsWhatFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			name  string
			step  step
			ctx   func() context.Context
			fails bool
		}{
			{name: "429", step: answer(429), fails: true},
			{name: "500", step: answer(500), fails: true},
			{name: "network error", step: step{err: errReset}, fails: true},
			{name: "404", step: answer(404)},
			{name: "400", step: answer(400)},
			{name: "200", step: answer(200)},
			{name: "cancelled by the caller", step: step{err: context.Canceled}, ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
		}
		for _, tt := range tests {
			s := newScript(tt.step)
			tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 3})
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx()
			}
			for range 3 {
				_, _ = callOnce(t, tr, ctx)
				time.Sleep(time.Second) // a refusal a second: each is an event
			}
			st := tr.KeyStatus(host).Breaker
			if open := st.State == BreakerOpen; open != tt.fails {
				t.Errorf("%s: breaker %v after 3 of them, want open %v", tt.name, st.State, tt.fails)
			}
		}
	})
}

func TestBreakerEscalatesAndDecays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503))
		var changes []string
		var mu sync.Mutex
		var tr *Transport
		p := BreakerPolicy{
			ConsecutiveFailures: 1,
			Cooldown:            time.Minute,
			Escalation:          []time.Duration{10 * time.Minute, time.Hour},
			Decay:               24 * time.Hour,
			OnStateChange: func(c BreakerChange) {
				// Runs outside any lock: asking the transport must not deadlock.
				_ = tr.KeyStatus(c.Key)
				mu.Lock()
				changes = append(changes, fmt.Sprintf("%s->%s", c.From, c.To))
				mu.Unlock()
			},
		}
		tr = breakerTransport(s.mock(), p)
		resetIn := func() time.Duration {
			_, err := callOnce(t, tr, noWait())
			var coe *CircuitOpenError
			if !errors.As(err, &coe) {
				t.Fatalf("err = %v, want the breaker open", err)
			}
			return coe.ResetIn
		}

		_, _ = callOnce(t, tr, noWait()) // trips
		if got := resetIn(); got != time.Minute {
			t.Fatalf("after the trip: resets in %v, want 1m", got)
		}
		for i, want := range []time.Duration{10 * time.Minute, time.Hour, time.Hour} {
			time.Sleep(tr.KeyStatus(host).Breaker.ResetIn)
			_, _ = callOnce(t, tr, noWait()) // the probe fails
			if got := resetIn(); got != want {
				t.Fatalf("after failed probe %d: resets in %v, want %v", i+1, got, want)
			}
			if lvl := tr.KeyStatus(host).Breaker.Level; lvl != min(i+1, 2) {
				t.Errorf("after failed probe %d: level %d, want %d", i+1, lvl, min(i+1, 2))
			}
		}

		// A good probe closes it; a quiet day brings the level one step down.
		time.Sleep(time.Hour)
		s.reset(answer(200), answer(503))
		if status, err := callOnce(t, tr, noWait()); status != 200 {
			t.Fatalf("probe = %d, %v; want 200", status, err)
		}
		time.Sleep(24 * time.Hour)
		_, _ = callOnce(t, tr, noWait()) // trips again
		if got := resetIn(); got != 10*time.Minute {
			t.Errorf("trip after a quiet day: resets in %v, want 10m, one level down from 1h", got)
		}

		mu.Lock()
		defer mu.Unlock()
		want := "closed->open open->half-open half-open->open open->half-open half-open->open " +
			"open->half-open half-open->open open->half-open half-open->closed closed->open"
		if got := strings.Join(changes, " "); got != want {
			t.Errorf("state changes:\n got %s\nwant %s", got, want)
		}
	})
}

func TestBreakerRollingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			name  string
			times []time.Duration // when the three failures come
			trips bool
		}{
			{name: "3 in 10 minutes", times: []time.Duration{0, 5 * time.Minute, 9*time.Minute + 50*time.Second}, trips: true},
			{name: "3 over 11 minutes", times: []time.Duration{0, 5*time.Minute + 30*time.Second, 11 * time.Minute}, trips: false},
		}
		for _, tt := range tests {
			s := newScript(answer(200))
			tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 100, WindowFailures: 3, Window: 10 * time.Minute})
			start := time.Now()
			for _, at := range tt.times {
				time.Sleep(at - time.Since(start))
				s.reset(answer(429), answer(200))
				_, _ = callOnce(t, tr, noWait()) // a failure
				_, _ = callOnce(t, tr, noWait()) // and a success: the window counts failures, not runs
			}
			if open := tr.KeyStatus(host).Breaker.State == BreakerOpen; open != tt.trips {
				t.Errorf("%s: open = %v, want %v", tt.name, open, tt.trips)
			}
		}
	})
}

func TestBreakerPolicyValidate(t *testing.T) {
	tests := []struct {
		give BreakerPolicy
		want string
	}{
		{give: BreakerPolicy{}},
		{give: BreakerPolicy{ConsecutiveFailures: -1}, want: "ConsecutiveFailures (-1)"},
		{give: BreakerPolicy{HalfOpenProbes: 3, SuccessesToClose: 2}, want: "SuccessesToClose (2) is below HalfOpenProbes (3)"},
		{give: BreakerPolicy{Cooldown: time.Hour, Escalation: []time.Duration{time.Minute}}, want: "Escalation[0] (1m0s) is below Cooldown (1h0m0s)"},
		{give: BreakerPolicy{WindowFailures: -2}, want: "WindowFailures (-2)"},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate = %v, want %q", err, tt.want)
		}
	}
}

func TestBreakerSuccessResetsTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 3})
		send := func(status int) {
			s.reset(answer(status))
			_, _ = callOnce(t, tr, noWait())
		}
		for _, status := range []int{500, 500, 200, 500, 500, 200, 500, 500, 200} {
			send(status)
		}
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerClosed || st.ConsecutiveFailures != 0 {
			t.Fatalf("after runs of 2 failures broken by successes: %v with %d in a row, want closed with 0", st.State, st.ConsecutiveFailures)
		}
		for range 3 {
			send(500)
		}
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerOpen {
			t.Errorf("after 3 failures in a row: %v, want open", st.State)
		}
	})
}

func TestBreakerTripsUnderConcurrentFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 50 callers fail at once, many times over: every failure must
		// reach gobreaker, fast path or not, and trip it.
		var mu sync.Mutex
		sent := 0
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			mu.Lock()
			sent++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return &http.Response{StatusCode: 500, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 60})
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				for range 20 {
					_, _ = callOnce(t, tr, noWait())
				}
			})
		}
		wg.Wait()
		if st := tr.KeyStatus(host).Breaker; st.State != BreakerOpen {
			t.Errorf("breaker %v after %d failures, want open", st.State, sent)
		}
		if sent < 60 || sent > 60+50 {
			t.Errorf("%d requests sent, want 60 to trip it plus at most the 50 in flight", sent)
		}
	})
}

func TestEscalatedCooldownSurvivesStatusPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503))
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute,
			Escalation: []time.Duration{time.Hour}})
		_, _ = callOnce(t, tr, noWait()) // trips for 1m
		time.Sleep(time.Minute)
		_, _ = callOnce(t, tr, noWait()) // the probe fails: open for 1h
		time.Sleep(2 * time.Minute)      // past gobreaker's own, base, timeout
		if blocked, d := tr.Blocking(host); !blocked || d != 58*time.Minute {
			t.Errorf("Blocking 2m into the 1h cooldown = %v, %v; want true, 58m", blocked, d)
		}
		before := s.calls()
		if _, err := callOnce(t, tr, noWait()); !errors.Is(err, ErrCircuitOpen) || s.calls() != before {
			t.Errorf("call 2m into the 1h cooldown: err %v, %d sent; want ErrCircuitOpen and nothing sent", err, s.calls()-before)
		}
	})
}

func TestCircuitOpenFailuresCountTheTrippingRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 3})
		send := func(status int) {
			s.reset(answer(status))
			_, _ = callOnce(t, tr, noWait())
		}
		for range 10 {
			send(500)
			send(200)
		}
		for range 3 {
			send(500)
		}
		var coe *CircuitOpenError
		if _, err := callOnce(t, tr, noWait()); !errors.As(err, &coe) || coe.Failures != 3 {
			t.Errorf("err = %v, want a CircuitOpenError after the 3 failures in a row", err)
		}
	})
}

// TestBreakerHoldsAttemptsQueuedWhenItOpens: attempts the breaker let in
// while closed, still waiting for their turn in a limit when it opens,
// are not sent: they meet the open breaker as a new attempt would.
func TestBreakerHoldsAttemptsQueuedWhenItOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503))
		mock := s.mock()
		// The answer takes 50ms, so that every call is past the breaker
		// and queued in the limit before the first failure opens it.
		slow := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			time.Sleep(50 * time.Millisecond)
			return mock.RoundTrip(req)
		})
		tr := New(slow, WithRetry(RetryPolicy{MaxAttempts: 1, TotalWaitCap: 5 * time.Second}),
			WithLimit(Limit{Rate: 10, Burst: 1}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute}))
		var wg sync.WaitGroup
		var mu sync.Mutex
		refused := 0
		for range 5 {
			wg.Go(func() {
				_, err := callOnce(t, tr, context.Background())
				var coe *CircuitOpenError
				if errors.As(err, &coe) {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// The first 503 opens the breaker at 50ms; the four others were
		// queued for 100ms to 400ms.
		if s.calls() != 1 || refused != 4 {
			t.Errorf("%d requests sent and %d calls refused, want 1 sent and the 4 queued ones refused", s.calls(), refused)
		}
	})
}
