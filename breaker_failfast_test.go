package ratewise

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// youtube-remediation-plan.md, Phase 2 "Batch fail-fast": while the
// breaker is open a batch's calls fail at once, without a request, and
// say when the cooldown ends (provider-rate-limiting.md's
// ProviderUnavailableError: state, failureCount, resetIn). Without
// FailFast a call whose budget fits the cooldown waits it out instead;
// with it, no TotalWaitCap needs lowering below the cooldown.
func TestBreakerFailFastRefusesAnOpenBreakerAtOnce(t *testing.T) {
	for _, failFast := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s := newScript(answer(500))
			tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 3, Cooldown: 5 * time.Minute, FailFast: failFast})
			for range 3 {
				_, _ = callOnce(t, tr, context.Background())
			}
			ctx, stats := WithCallStats(WithBudget(context.Background(), time.Hour))
			start := time.Now()
			status, err := callOnce(t, tr, ctx)
			took := time.Since(start)
			if !failFast {
				if status != 500 || took != 5*time.Minute || s.calls() != 4 {
					t.Errorf("without FailFast: %d, %v after %v, %d sent; want the probe's 500 after the 5m cooldown, 4 sent",
						status, err, took, s.calls())
				}
				return
			}
			var open *CircuitOpenError
			if !errors.As(err, &open) || open.State != BreakerOpen || open.ResetIn != 5*time.Minute || open.Failures != 3 {
				t.Fatalf("FailFast: err = %v, want a CircuitOpenError open, resetting in 5m, after 3 failures", err)
			}
			if took != 0 || stats.Waited() != 0 || s.calls() != 3 {
				t.Errorf("FailFast: took %v, waited %v, %d sent; want at once, nothing waited, nothing more sent",
					took, stats.Waited(), s.calls())
			}
		})
	}
}

// youtube-remediation-plan.md, Phase 2 "HALF_OPEN probes: single probe
// request allowed" and "Batch fail-fast": while the probe is out, a
// fail-fast call does not wait for its outcome.
func TestBreakerFailFastDoesNotWaitForTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		probing := make(chan struct{})
		failing := true
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			if failing {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			close(probing)
			<-release
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute, FailFast: true})
		_, _ = callOnce(t, tr, context.Background())
		time.Sleep(time.Minute)
		failing = false
		probe := goCallOnce(t, tr, context.Background())
		<-probing

		start := time.Now()
		_, err := callOnce(t, tr, WithBudget(context.Background(), time.Hour))
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.State != BreakerHalfOpen || time.Since(start) != 0 {
			t.Errorf("during the probe: err = %v after %v, want a CircuitOpenError half-open at once", err, time.Since(start))
		}
		close(release)
		if err := <-probe; err != nil {
			t.Errorf("probe: %v", err)
		}
	})
}

// youtube-remediation-plan.md, Phase 2 "Multi-instance: all backend
// instances share breaker state" with "Batch fail-fast": a replica whose
// breaker never saw a failure refuses at once while the shared one is
// open.
func TestBreakerFailFastRefusesASharedOpenBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		policy := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, Store: mem, FailFast: true}
		failing := newScript(answer(503))
		a := breakerTransport(failing.mock(), policy)
		for range 2 {
			_, _ = callOnce(t, a, context.Background())
		}
		other := newScript(answer(200))
		b := breakerTransport(other.mock(), policy)
		start := time.Now()
		_, err := callOnce(t, b, WithBudget(context.Background(), 2*time.Hour))
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.State != BreakerOpen || open.ResetIn != time.Hour || time.Since(start) != 0 {
			t.Errorf("replica b: err = %v after %v, want a CircuitOpenError open for 1h, at once", err, time.Since(start))
		}
		if other.calls() != 0 {
			t.Errorf("replica b sent %d requests, want none", other.calls())
		}
	})
}
