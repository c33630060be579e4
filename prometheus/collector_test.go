package prometheus

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ratewise/ratewise"
)

// scripted answers each request to a host with the next of its statuses,
// the last repeating; 429s ask for Retry-After.
func scripted(t *testing.T, statuses map[string][]int) http.RoundTripper {
	t.Helper()
	mock := httpmock.NewMockTransport()
	next := map[string]int{}
	mock.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		list := statuses[req.URL.Host]
		i := min(next[req.URL.Host], len(list)-1)
		next[req.URL.Host]++
		resp := httpmock.NewStringResponse(list[i], "")
		if list[i] == 429 {
			resp.Header.Set("Retry-After", "2")
		}
		return resp, nil
	})
	return mock
}

func get(t *testing.T, tr http.RoundTripper, host string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+host+"/items", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

func TestCollectorAfterAScriptedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := scripted(t, map[string][]int{"a.test": {429, 200}, "b.test": {503}})
		// FinalServerErrors: a 503 is handed back, not retried, so that
		// the two calls to b.test are the breaker's two failures.
		tr := ratewise.New(base, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 2, Classify: ratewise.FinalServerErrors}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: 90 * time.Second}))
		get(t, tr, "a.test") // 429, a 2s backoff, 200
		get(t, tr, "b.test") // 503: final
		get(t, tr, "b.test") // 503 again: the breaker opens
		time.Sleep(30 * time.Second)
		c := NewCollector(tr)
		want := `
# HELP ratewise_aborts_total Calls that gave up, by reason.
# TYPE ratewise_aborts_total counter
ratewise_aborts_total{reason="attempts"} 0
ratewise_aborts_total{reason="blocked"} 0
ratewise_aborts_total{reason="body"} 0
ratewise_aborts_total{reason="breaker_open"} 0
ratewise_aborts_total{reason="canceled"} 0
ratewise_aborts_total{reason="invalid"} 0
ratewise_aborts_total{reason="limit"} 0
ratewise_aborts_total{reason="network"} 0
ratewise_aborts_total{reason="retry_budget"} 0
ratewise_aborts_total{reason="wait_budget"} 0
# HELP ratewise_attempts_total Requests sent to the server, retries included.
# TYPE ratewise_attempts_total counter
ratewise_attempts_total 4
# HELP ratewise_breaker_cooldown_remaining_seconds Time until an open breaker lets a probe through.
# TYPE ratewise_breaker_cooldown_remaining_seconds gauge
ratewise_breaker_cooldown_remaining_seconds{key="a.test"} 0
ratewise_breaker_cooldown_remaining_seconds{key="b.test"} 60
# HELP ratewise_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE ratewise_breaker_state gauge
ratewise_breaker_state{key="a.test"} 0
ratewise_breaker_state{key="b.test"} 2
# HELP ratewise_rate_limit_hits_total Responses read as rate-limited, by key.
# TYPE ratewise_rate_limit_hits_total counter
ratewise_rate_limit_hits_total{key="a.test"} 1
# HELP ratewise_calls_total Calls made through the transport.
# TYPE ratewise_calls_total counter
ratewise_calls_total 3
# HELP ratewise_retries_total Retries, by the status that caused them or "network error".
# TYPE ratewise_retries_total counter
ratewise_retries_total{reason="429"} 1
# HELP ratewise_wait_duration_seconds How long waits lasted, by kind.
# TYPE ratewise_wait_duration_seconds histogram
ratewise_wait_duration_seconds_bucket{kind="backoff",le="0.1"} 0
ratewise_wait_duration_seconds_bucket{kind="backoff",le="0.25"} 0
ratewise_wait_duration_seconds_bucket{kind="backoff",le="0.5"} 0
ratewise_wait_duration_seconds_bucket{kind="backoff",le="1"} 0
ratewise_wait_duration_seconds_bucket{kind="backoff",le="2.5"} 1
ratewise_wait_duration_seconds_bucket{kind="backoff",le="5"} 1
ratewise_wait_duration_seconds_bucket{kind="backoff",le="10"} 1
ratewise_wait_duration_seconds_bucket{kind="backoff",le="30"} 1
ratewise_wait_duration_seconds_bucket{kind="backoff",le="60"} 1
ratewise_wait_duration_seconds_bucket{kind="backoff",le="+Inf"} 1
ratewise_wait_duration_seconds_sum{kind="backoff"} 2
ratewise_wait_duration_seconds_count{kind="backoff"} 1
# HELP ratewise_waits_total Waits, by kind.
# TYPE ratewise_waits_total counter
ratewise_waits_total{kind="backoff"} 1
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
		if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
	})
}

func TestCollectorBoundsKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		statuses := map[string][]int{}
		for i := range 6 {
			statuses[fmt.Sprintf("h%d.test", i)] = []int{429}
		}
		// Two failures trip a breaker for an hour: no call waits for it.
		tr := ratewise.New(scripted(t, statuses), ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
			ratewise.WithPause(ratewise.PausePolicy{Off: true}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour}))
		for i := range 6 {
			for range min(i+1, 3) { // h0 once, h1 twice, the others three times
				get(t, tr, fmt.Sprintf("h%d.test", i))
			}
		}
		c := NewCollector(tr, WithMaxKeys(3), WithConstLabels(prom.Labels{"api": "demo"}))
		// A call to an open breaker sends nothing: h1 to h5 have two hits.
		// The three named are the most hit, ties by name; h0, h4 and h5 sum
		// under other.
		want := `
# HELP ratewise_rate_limit_hits_total Responses read as rate-limited, by key.
# TYPE ratewise_rate_limit_hits_total counter
ratewise_rate_limit_hits_total{api="demo",key="h1.test"} 2
ratewise_rate_limit_hits_total{api="demo",key="h2.test"} 2
ratewise_rate_limit_hits_total{api="demo",key="h3.test"} 2
ratewise_rate_limit_hits_total{api="demo",key="other"} 5
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "ratewise_rate_limit_hits_total"); err != nil {
			t.Error(err)
		}
		// h0 never tripped (one failure); h1..h5 are open. Three are named,
		// the worst first, the rest folded into other.
		if n := testutil.CollectAndCount(c, "ratewise_breaker_state"); n != 4 {
			t.Errorf("%d breaker_state series, want 3 keys and other", n)
		}
		want = `
# HELP ratewise_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE ratewise_breaker_state gauge
ratewise_breaker_state{api="demo",key="h1.test"} 2
ratewise_breaker_state{api="demo",key="h2.test"} 2
ratewise_breaker_state{api="demo",key="h3.test"} 2
ratewise_breaker_state{api="demo",key="other"} 2
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "ratewise_breaker_state"); err != nil {
			t.Error(err)
		}
	})
}

func TestCollectorRegisters(t *testing.T) {
	reg := prom.NewPedanticRegistry()
	if err := reg.Register(NewCollector(ratewise.New(nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}

// A host named "other" is folded with the keys past the cap, not sent
// twice under one label set.
func TestCollectorBreakerNamedOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := scripted(t, map[string][]int{"other": {503}, "p.test": {200}})
		tr := ratewise.New(base, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
			ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 1}))
		get(t, tr, "other")
		get(t, tr, "p.test")
		reg := prom.NewPedanticRegistry()
		c := NewCollector(tr, WithMaxKeys(1))
		reg.MustRegister(c)
		if _, err := reg.Gather(); err != nil {
			t.Fatalf("Gather: %v", err)
		}
		want := `
# HELP ratewise_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE ratewise_breaker_state gauge
ratewise_breaker_state{key="other"} 2
ratewise_breaker_state{key="p.test"} 0
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), "ratewise_breaker_state"); err != nil {
			t.Error(err)
		}
	})
}
