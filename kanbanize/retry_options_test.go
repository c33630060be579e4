package kanbanize_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

func TestRetryOptionsValidate(t *testing.T) {
	tests := []struct {
		give kanbanize.RetryOptions
		want string
	}{
		{give: kanbanize.RetryOptions{}},
		{give: kanbanize.RetryOptions{MaxAttempts: -1}, want: "max_attempts (-1)"},
		{give: kanbanize.RetryOptions{InitialDelayMs: -5}, want: "initial_delay_ms (-5)"},
		{give: kanbanize.RetryOptions{Multiplier: 0.5}, want: "multiplier (0.5)"},
		{give: kanbanize.RetryOptions{InitialDelayMs: 10000, MaxDelayMs: 5000}, want: "max_delay_ms (5000) is below initial_delay_ms (10000)"},
		{give: kanbanize.RetryOptions{TotalWaitCapMs: 100}, want: "total_wait_cap_ms (100) is below initial_delay_ms (5000)"},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tt.give, err, tt.want)
		}
	}
	c, fake := newClient(t, kanbanizetest.Config{})
	if _, err := c.ReadCardWithRetry(context.Background(), "100", kanbanize.RetryOptions{MaxAttempts: -1}); err == nil {
		t.Error("invalid options: no error")
	}
	if _, err := c.ReadCardWithRetry(context.Background(), "not a card", kanbanize.RetryOptions{}); !errors.Is(err, kanbanize.ErrBadCardID) {
		t.Errorf("bad card: err = %v, want ErrBadCardID", err)
	}
	if fake.Stats().Requests != 0 {
		t.Errorf("%d requests sent for invalid input, want none", fake.Stats().Requests)
	}
}

func TestRetryOptionsFromToolArguments(t *testing.T) {
	var o kanbanize.RetryOptions
	args := `{"max_attempts":3,"initial_delay_ms":100,"max_delay_ms":1000,"multiplier":1.5,"full_jitter":false,"respect_retry_after":false,"total_wait_cap_ms":2000,"fail_on_partial":true}`
	if err := json.Unmarshal([]byte(args), &o); err != nil {
		t.Fatal(err)
	}
	p := o.RetryPolicy()
	if p.MaxAttempts != 3 || p.InitialDelay != 100*time.Millisecond || p.MaxDelay != time.Second || p.Multiplier != 1.5 ||
		p.Jitter != ratewise.JitterProportional || !p.IgnoreRetryAfter || p.TotalWaitCap != 2*time.Second || !o.FailOnPartial {
		t.Errorf("policy from %s = %+v", args, p)
	}
	d := kanbanize.RetryOptions{}.RetryPolicy()
	if d.MaxAttempts != 10 || d.InitialDelay != 5*time.Second || d.MaxDelay != 5*time.Minute || d.TotalWaitCap != 20*time.Minute ||
		d.Jitter != ratewise.JitterFull || d.IgnoreRetryAfter {
		t.Errorf("default policy = %+v, want the tool's defaults", d)
	}
}

func TestRetryOptionsWithDefaults(t *testing.T) {
	got := kanbanize.RetryOptions{MaxAttempts: 3, FullJitter: ptr(false)}.WithDefaults()
	want := kanbanize.RetryOptions{MaxAttempts: 3, InitialDelayMs: kanbanize.DefaultInitialDelayMs, MaxDelayMs: kanbanize.DefaultMaxDelayMs,
		Multiplier: kanbanize.DefaultMultiplier, TotalWaitCapMs: kanbanize.DefaultTotalWaitCapMs}
	if got.FullJitter == nil || *got.FullJitter || got.RespectRetryAfter == nil || !*got.RespectRetryAfter {
		t.Errorf("flags: full jitter %v, respect Retry-After %v; want the given false kept and the unset true", got.FullJitter, got.RespectRetryAfter)
	}
	got.FullJitter, got.RespectRetryAfter = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithDefaults = %+v, want %+v", got, want)
	}
}

// KeyStatus shows the plan's scopes by the API key's hash, never the
// key, and the learned scope, pause and breaker by the host.
func TestClientKeyStatus(t *testing.T) {
	c, _ := newClient(t, kanbanizetest.Config{}, kanbanize.WithPlan(kanbanize.PlanStandard))
	if _, err := c.ReadCard(context.Background(), "100"); err != nil {
		t.Fatal(err)
	}
	st := c.KeyStatus()
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), kanbanizetest.DefaultAPIKey) {
		t.Errorf("KeyStatus shows the API key: %s", b)
	}
	names := map[string]ratewise.ScopeStatus{}
	for _, s := range st.Scopes {
		names[s.Name] = s
	}
	minute, ok := names["kanbanize standard per minute"]
	if !ok || !strings.HasPrefix(minute.Key, "apikey:") || minute.Burst != 30 || minute.Tokens >= 28 {
		t.Errorf("the plan's per-minute scope: %+v, want it keyed by the key's hash, 30 a minute, three tokens spent", minute)
	}
	if learned, ok := names[ratewise.LearnedScope]; !ok || learned.Key != st.Key || st.Key == "" {
		t.Errorf("the learned scope: %+v under %q, want it by the host", learned, st.Key)
	}
	if st.Breaker == nil || st.Breaker.Key != minute.Key {
		t.Errorf("the breaker: %+v, want the API key's", st.Breaker)
	}
}

// The envelope says why a read waited: for the account's pace, or after
// refusals. A read refused waits after its refusals; reads past the
// plan's minute quota wait for their turn; and the two, summed over the
// three reads, cover at least the time the read waited.
func TestEnvelopeSaysWhyTheReadWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointComments, kanbanizetest.Fault429)},
			kanbanize.WithPlan(kanbanize.PlanStandard))
		opts := kanbanize.RetryOptions{InitialDelayMs: 100, MaxDelayMs: 1000}
		var paced bool
		for id := 101; id < 113; id++ { // 36 requests: past the 30 of a minute
			env, err := c.ReadCardWithRetry(context.Background(), kanbanize.ID(id).String(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if id == 101 && (env.RefusalWaitSeconds <= 0 || env.RateLimitHits != 1) {
				t.Errorf("card 101, its comments refused once: refusal_wait_seconds %v, rate_limit_hits %d", env.RefusalWaitSeconds, env.RateLimitHits)
			}
			if env.PaceWaitSeconds+env.RefusalWaitSeconds < env.WaitSeconds-1e-9 {
				t.Errorf("card %d: pace %vs and refusals %vs, under the %vs it waited", id, env.PaceWaitSeconds, env.RefusalWaitSeconds, env.WaitSeconds)
			}
			paced = paced || env.PaceWaitSeconds > 0
		}
		if !paced {
			t.Error("no read past the minute's quota waited for the pace")
		}
	})
}
