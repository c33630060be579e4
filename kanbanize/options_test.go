package kanbanize_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// logBuffer is a slog logger writing text lines, without their time, to
// a buffer the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// matching returns the lines holding every one of parts.
func (b *logBuffer) matching(parts ...string) []string {
	var out []string
	for _, line := range b.lines() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		}}))
}

// kanbanize-rate-limit-plan.md §8 (structured logs): with WithLogger, the
// client's transport logs its retries (event=rate_retry), and the client
// a part it returns without, at Warn:
// level=warn event=rate_partial endpoint=subtasks error="max retries".
func TestWithLoggerLogsRetriesAndPartials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		c, _ := newClient(t, kanbanizetest.Config{Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
			kanbanizetest.EndpointCard:     {kanbanizetest.Fault429},
			kanbanizetest.EndpointSubtasks: repeat(kanbanizetest.Fault429, 3),
		}}, kanbanize.WithLogger(logs.logger()))
		opts := quick
		opts.MaxAttempts = 3
		env, err := c.ReadCardWithRetry(context.Background(), "101", opts)
		if err != nil {
			t.Fatal(err)
		}
		if env.PartialError["subtasks"] != "max retries exceeded (429)" {
			t.Fatalf("envelope = %+v, want the subtasks failed after 3 attempts", env)
		}
		if got := logs.matching("event=rate_retry", "endpoint=card", "reason=429"); len(got) != 1 {
			t.Errorf("rate_retry lines of the card: %q, want 1 in\n%s", got, strings.Join(logs.lines(), "\n"))
		}
		if got := logs.matching("event=rate_retry", "endpoint=subtasks"); len(got) != 2 {
			t.Errorf("rate_retry lines of the subtasks: %q, want 2", got)
		}
		want := `level=WARN msg="card read without its subtasks" event=rate_partial endpoint=subtasks error="max retries exceeded (429)" attempts=3 card_id=101`
		if got := logs.matching("event=rate_partial"); len(got) != 1 || got[0] != want {
			t.Errorf("rate_partial lines = %q, want\n%s", got, want)
		}
	})
}

// kanbanize-rate-limit-plan.md §6 (partial results): rate_partial is
// logged only when the call goes on without a part: not when the card
// fails, nor with FailOnPartial, nor when every part was read.
func TestRatePartialOnlyWhenTheCallGoesOn(t *testing.T) {
	for _, tt := range []struct {
		name    string
		card    string
		scripts map[kanbanizetest.Endpoint][]kanbanizetest.Fault
		failOn  bool
	}{
		{"complete", "101", nil, false},
		{"card failed", "101", scripts(kanbanizetest.EndpointCard, kanbanizetest.FaultMalformedJSON), false},
		{"card not found", "99999", nil, false},
		{"fail on partial", "101", scripts(kanbanizetest.EndpointComments, kanbanizetest.FaultMalformedJSON), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs logBuffer
				c, _ := newClient(t, kanbanizetest.Config{Scripts: tt.scripts}, kanbanize.WithLogger(logs.logger()))
				opts := quick
				opts.FailOnPartial = tt.failOn
				_, _ = c.ReadCardWithRetry(context.Background(), tt.card, opts)
				if got := logs.matching("event=rate_partial"); len(got) != 0 {
					t.Errorf("rate_partial lines = %q, want none", got)
				}
			})
		})
	}
}

// kanbanize-rate-limit-plan.md §8: a trace given through
// WithTransportOptions hears the client's calls, without the caller
// rebuilding the client's transport.
func TestWithTransportOptionsTraceHearsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var endpoints []string
		trace := &ratewise.Trace{AttemptStarted: func(a ratewise.AttemptInfo) {
			mu.Lock()
			defer mu.Unlock()
			endpoints = append(endpoints, a.Endpoint)
		}}
		c, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointCard, kanbanizetest.Fault429)},
			kanbanize.WithTransportOptions(ratewise.WithTrace(trace)))
		if _, err := c.ReadCardWithRetry(context.Background(), "101", quick); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(endpoints) != 4 || endpoints[0] != "card" || endpoints[1] != "card" {
			t.Errorf("attempts heard: %q, want the card twice, then comments and subtasks", endpoints)
		}
		// The client's own options still hold: its breaker is there.
		if c.Transport().BreakerStatuses() == nil {
			t.Error("the client's breaker is gone")
		}
	})
}

// Options given through WithTransportOptions come after the client's
// own: a WithRetry replaces the client's policy.
func TestWithTransportOptionsComeLast(t *testing.T) {
	c, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithTransportOptions(
		ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 2})))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Transport().RetryPolicy().MaxAttempts; got != 2 {
		t.Errorf("MaxAttempts = %d, want the caller's 2 over the client's", got)
	}
}

// A ratewise transport of the caller's is already built: the options
// cannot apply, and NewClient says so rather than drop them. WithLogger
// then still logs the client's own events.
func TestWithTransportOptionsOverAnOwnTransport(t *testing.T) {
	own := &http.Client{Transport: ratewise.New(nil)}
	_, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(own),
		kanbanize.WithTransportOptions(ratewise.WithTrace(&ratewise.Trace{})))
	if err == nil || !strings.Contains(err.Error(), "WithTransportOptions cannot apply") {
		t.Errorf("err = %v, want WithTransportOptions refused", err)
	}

	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey,
			Scripts: scripts(kanbanizetest.EndpointComments, repeat(kanbanizetest.Fault429, 2)...)})
		rw := ratewise.New(fake.Transport())
		c, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: rw}),
			kanbanize.WithLogger(logs.logger()))
		if err != nil {
			t.Fatal(err)
		}
		opts := quick
		opts.MaxAttempts = 2
		if _, err := c.ReadCardWithRetry(context.Background(), "101", opts); err != nil {
			t.Fatal(err)
		}
		if got := logs.matching("event=rate_partial", "endpoint=comments"); len(got) != 1 {
			t.Errorf("rate_partial lines = %q, want the comments'", logs.lines())
		}
		if got := logs.matching("event=rate_retry"); len(got) != 0 {
			t.Errorf("the caller's transport logged %q through the client's logger", got)
		}
	})
}

// planKey is the key the plan's scopes keep the client's state under.
func planKey(t *testing.T) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://acme.kanbanize.com/api/v2/cards/101", nil)
	req.Header.Set("apikey", secretKey)
	return ratewise.ByHeader("apikey")(req)
}

// kanbanize-rate-limit-plan.md §1 (stay under the published limits, 30
// requests a minute on Standard): WithPlan adds the plan's scopes to a
// ratewise transport of the caller's, which then paces the client's
// requests (the 31st within the minute waits) and nothing else it sends.
func TestWithPlanOverAnOwnTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey})
		rw := ratewise.New(fake.Transport())
		c, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: rw}),
			kanbanize.WithPlan(kanbanize.PlanStandard))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range rw.Limits() {
			names = append(names, l.Name)
		}
		if want := "kanbanize standard per minute,kanbanize standard per hour,learned"; strings.Join(names, ",") != want {
			t.Errorf("Limits() are named %q, want %s: the learned scope stays last", names, want)
		}
		st := rw.KeyStatus(planKey(t)).Scopes
		if len(st) != 3 || st[0].Burst != 30 || st[1].Burst != 600 {
			t.Errorf("KeyStatus scopes = %+v, want the plan's 30 a minute and 600 an hour", st)
		}

		start := time.Now()
		for id := 100; id < 110; id++ { // 30 requests
			if _, err := c.ReadCard(context.Background(), kanbanize.ID(id).String()); err != nil {
				t.Fatal(err)
			}
		}
		if took := time.Since(start); took != 0 {
			t.Fatalf("the plan's 30 requests of a minute took %v, want none", took)
		}
		// The 31st, and the two after, go one every 2s.
		if _, err := c.ReadCard(context.Background(), "110"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 6*time.Second {
			t.Errorf("the 31st to 33rd requests of the minute came after %v, want 6s", took)
		}
		// Requests without the API key pass the plan untouched.
		mid := time.Now()
		for range 40 {
			req, _ := http.NewRequest(http.MethodGet, "https://acme.kanbanize.com/api/v2/cards/101", nil)
			resp, err := rw.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
		if took := time.Since(mid); took != 0 {
			t.Errorf("40 requests without an API key took %v, paced by the plan", took)
		}
	})
}

// kanbanize-rate-limit-plan.md §1: clients of one plan sharing one
// transport add the plan's scopes once, and none of them fails, even
// when they are made at once.
func TestWithPlanOnASharedTransport(t *testing.T) {
	rw := ratewise.New(nil)
	shared := &http.Client{Transport: rw}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(shared), kanbanize.WithPlan(kanbanize.PlanStandard)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if _, err := kanbanize.NewClient("acme", "another-key", kanbanize.WithHTTPClient(shared), kanbanize.WithPlan(kanbanize.PlanStandard)); err != nil {
		t.Error(err)
	}
	if n := len(rw.Limits()); n != 3 {
		t.Errorf("%d scopes: %+v; want the learned one and the plan's two, once", n, rw.Limits())
	}
}
