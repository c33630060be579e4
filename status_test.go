package ratewise

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestKeyStatusJSON(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}),
			WithLimit(Limit{Name: "plan", Rate: rate.Every(2 * time.Second), Burst: 30}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1}))
		_, _ = callOnce(t, tr, context.Background())
		st := tr.KeyStatus(host)
		if st.PausedFor != 30*time.Second || st.Breaker.State != BreakerOpen || st.Scopes[0].Tokens != 29 {
			t.Fatalf("KeyStatus = %+v, breaker %+v", st, *st.Breaker)
		}
		js, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"key":"api.example.com"`, `"paused_for_seconds":30`, `"name":"plan"`,
			`"tokens":29`, `"rate_per_second":0.5`, `"burst":30`, `"state":"open"`, `"reset_in_seconds":60`} {
			if !strings.Contains(string(js), want) {
				t.Errorf("JSON %s lacks %s", js, want)
			}
		}
	})
}

func TestKeyStatusOfUnknownKeyCreatesNothing(t *testing.T) {
	tr := New(nil, WithLimit(Limit{Rate: 1}), WithBreaker(BreakerPolicy{}))
	st := tr.KeyStatus("never.example.com")
	if st.PausedFor != 0 || st.Scopes[0].Tokens != 1 || st.Breaker.State != BreakerClosed {
		t.Errorf("KeyStatus of an unknown key = %+v, want an idle one", st)
	}
	if n := tr.scopes()[0].Len() + tr.breakers.Len(); n != 0 {
		t.Errorf("KeyStatus created %d states, want none", n)
	}
	if blocked, d := tr.Blocking("never.example.com"); blocked || d != 0 {
		t.Errorf("Blocking = %v, %v; want false, 0", blocked, d)
	}
}

func TestWithRetryPolicyPerRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 5}), WithPause(PausePolicy{Off: true}))
		ctx := WithRetryPolicy(context.Background(), RetryPolicy{MaxAttempts: 2})
		if _, err := callOnce(t, tr, ctx); err != nil {
			t.Fatal(err)
		}
		if s.calls() != 2 {
			t.Errorf("server calls = %d, want the context's 2 attempts, not the transport's 5", s.calls())
		}
		bad := WithRetryPolicy(context.Background(), RetryPolicy{MaxAttempts: -1})
		if _, err := callOnce(t, tr, bad); err == nil || !strings.Contains(err.Error(), "MaxAttempts (-1)") {
			t.Errorf("invalid per-request policy: err = %v, want its validation error", err)
		}
		// Options compose: a later WithPriority keeps the policy.
		both := WithPriority(ctx, PriorityHigh)
		if o := optionsFrom(both); o.retry == nil || o.retry.MaxAttempts != 2 || o.priority != PriorityHigh {
			t.Errorf("options = %+v, want both the policy and the priority", o)
		}
		if o := optionsFrom(ctx); o.priority != PriorityNormal {
			t.Errorf("WithPriority changed its parent's options: %+v", o)
		}
	})
}

func TestPausePolicyErrors(t *testing.T) {
	for _, p := range []PausePolicy{{Spread: -1}, {IdleTimeout: -1}} {
		if _, err := New(nil, WithPause(p)).RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
			t.Errorf("WithPause(%+v): RoundTrip returned no error", p)
		}
	}
	// Every bad field is named at once, as Limit and BreakerPolicy do.
	_, err := New(nil, WithPause(PausePolicy{Spread: -1, IdleTimeout: -1, MaxPause: -1})).RoundTrip(mustRequest(t, http.MethodGet, nil))
	for _, field := range []string{"Spread", "IdleTimeout", "MaxPause"} {
		if err == nil || !strings.Contains(err.Error(), "PausePolicy."+field) {
			t.Errorf("three bad fields: %v, want %s named", err, field)
		}
	}
}

func TestPriorityString(t *testing.T) {
	for p, want := range map[Priority]string{PriorityLow: "low", PriorityNormal: "normal", PriorityHigh: "high"} {
		if got := p.String(); got != want {
			t.Errorf("Priority(%d).String() = %q, want %q", p, got, want)
		}
	}
	for s, want := range map[BreakerState]string{BreakerClosed: "closed", BreakerHalfOpen: "half-open", BreakerOpen: "open", 9: "BreakerState(9)"} {
		if got := s.String(); got != want {
			t.Errorf("BreakerState(%d).String() = %q, want %q", s, got, want)
		}
	}
}

func TestLimitErrorMessage(t *testing.T) {
	err := error(&ClientLimitError{Scope: "plan", Key: host, Reason: "fail-fast", RetryIn: 2 * time.Second})
	if want := "ratewise: plan refused the request (fail-fast); a slot frees up in 2s"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err, want)
	}
	if !errors.Is(err, ErrLimited) {
		t.Error("ClientLimitError does not match ErrLimited")
	}
}

func TestBreakerStatuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1}))
		if got := New(nil).BreakerStatuses(); got != nil {
			t.Errorf("without breakers: %v, want nil", got)
		}
		for _, host := range []string{"a.example.com", "b.example.com"} {
			req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		got := tr.BreakerStatuses()
		slices.SortFunc(got, func(a, b BreakerStatus) int { return strings.Compare(a.Key, b.Key) })
		if len(got) != 2 || got[0].Key != "a.example.com" || got[1].Key != "b.example.com" ||
			got[0].State != BreakerOpen || got[0].ResetIn != DefaultBreakerCooldown {
			t.Errorf("BreakerStatuses = %+v, want both hosts open for the cooldown", got)
		}
	})
}
