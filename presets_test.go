package ratewise

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

func TestPresetTable(t *testing.T) {
	for _, tt := range []struct {
		preset                   Preset
		name                     string
		attempts                 int
		initial, maxDelay, total time.Duration
		budget, floor            float64
		inFlight, failures       int
		cooldown                 time.Duration
	}{
		{Conservative(), "conservative", 4, 2 * time.Second, time.Minute, 5 * time.Minute, 0.1, 2, 4, 5, 2 * time.Minute},
		{Moderate(), "moderate", 5, time.Second, 30 * time.Second, 2 * time.Minute, 0.2, 10, 0, 5, time.Minute},
		{Aggressive(), "aggressive", 8, 250 * time.Millisecond, 10 * time.Second, time.Minute, 0.5, 20, 0, 10, 15 * time.Second},
	} {
		p := tt.preset
		r := p.Retry.WithDefaults()
		b := p.Breaker.WithDefaults()
		if p.Name != tt.name || r.MaxAttempts != tt.attempts || r.InitialDelay != tt.initial || r.MaxDelay != tt.maxDelay ||
			r.TotalWaitCap != tt.total || r.RetryBudget != tt.budget || r.RetryBudgetFloor != tt.floor ||
			b.ConsecutiveFailures != tt.failures || b.Cooldown != tt.cooldown {
			t.Errorf("%s = %+v, breaker %+v; want the documented table", tt.name, r, b)
		}
		if err := r.Validate(); err != nil {
			t.Errorf("%s retry: %v", tt.name, err)
		}
		if err := b.Validate(); err != nil {
			t.Errorf("%s breaker: %v", tt.name, err)
		}
		// Every preset learns, as New does: its last scope is the learned
		// one; the in-flight cap, where it has one, comes first.
		tr := New(nil, WithPreset(p))
		limits := tr.Limits()
		if tr.err != nil || tr.breakers == nil || tr.RetryPolicy().MaxAttempts != tt.attempts || len(limits) == 0 ||
			limits[len(limits)-1].Name != LearnedScope || !limits[len(limits)-1].Adaptive {
			t.Errorf("New(WithPreset(%s)): err %v, limits %+v, breaker %v; want the learned scope last", tt.name, tr.err, limits, tr.breakers != nil)
		}
		if inFlight := limits[0].MaxConcurrent; inFlight != tt.inFlight {
			t.Errorf("%s: %d in flight, want %d", tt.name, inFlight, tt.inFlight)
		}
	}
}

func TestPresetThenOptionsOverride(t *testing.T) {
	tr := New(nil, WithPreset(Conservative()), WithRetry(RetryPolicy{MaxAttempts: 9}))
	if got := tr.RetryPolicy().MaxAttempts; got != 9 {
		t.Errorf("MaxAttempts = %d, want the later WithRetry's 9", got)
	}
}

// No preset fails a call on a rate-limited server because of its own
// breaker: 20 callers against a small bucket (5/s, a burst of 2, with
// and without Retry-After) get an answer every time, and the breaker
// never opens nor holds a call: each burst of refusals is one event, and
// the pace answers it. (A call may still end on a 429, rarely, when all
// three of Conservative's attempts meet the pace's search: that is its
// retry policy, breaker or not.)
func TestPresetsFailNoCallOnASmallBucket(t *testing.T) {
	for _, p := range []Preset{Conservative(), Moderate(), Aggressive()} {
		for _, mode := range []ratewisetest.RetryAfterMode{ratewisetest.RetryAfterSeconds, ratewisetest.RetryAfterNone} {
			t.Run(p.Name+"/"+mode.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					srv := ratewisetest.NewBucket(ratewisetest.Config{Rate: 5, Burst: 2, Latency: 20 * time.Millisecond, RetryAfter: mode})
					var opened atomic.Int32
					breaker := *p.Breaker
					breaker.OnStateChange = func(c BreakerChange) {
						if c.To == BreakerOpen {
							opened.Add(1)
						}
					}
					preset := p
					preset.Breaker = &breaker
					tr := New(srv, WithPreset(preset))
					var failed, refused atomic.Int32
					var wg sync.WaitGroup
					for range 20 {
						wg.Go(func() {
							for range 10 {
								status, err := callOnce(t, tr, context.Background())
								switch {
								case err != nil:
									if failed.Add(1) == 1 {
										t.Errorf("a call failed: %v", err)
									}
								case status != http.StatusOK:
									refused.Add(1)
								}
							}
						})
					}
					wg.Wait()
					if n := failed.Load(); n != 0 {
						t.Errorf("%d of 200 calls failed, want none", n)
					}
					if n := opened.Load(); n != 0 {
						t.Errorf("the breaker opened %d times against a server that only limits, want never", n)
					}
					if ws := tr.Stats().WaitsByKind["breaker"]; ws.Count != 0 {
						t.Errorf("%d calls waited for the breaker, want none", ws.Count)
					}
					if srv.Stats().Limited == 0 {
						t.Errorf("the server refused nothing: the test does not test")
					}
					if n := refused.Load(); n > 0 {
						t.Logf("%d of 200 calls ended on a 429, their attempts spent", n)
					}
				})
			})
		}
	}
}
