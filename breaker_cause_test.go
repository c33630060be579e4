package ratewise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"
)

// keyedRequest is a GET of testURL carrying an API key in a header.
func keyedRequest(t *testing.T, key string) *http.Request {
	t.Helper()
	req := mustRequest(t, http.MethodGet, nil)
	req.Header.Set("apikey", key)
	return req
}

// youtube-remediation-plan.md, Phase 2 "Record structured diagnostics:
// breaker opened-at, cooldown-until, exception type, sample message" (the
// openedAt, lastTriggeredBy, triggerMessage and backoffLevel fields): the
// status of an open breaker says when it opened, at which level, and what
// tripped it, the first line of the body without the API key, while the
// caller still reads the body in full.
func TestBreakerStatusSaysWhyItOpened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const apiKey = "planted-api-key-42"
		body := "upstream refused key " + apiKey + ": overloaded\nretry later\n"
		s := newScript(step{status: 503, header: http.Header{}, body: body})
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour})
		if js, _ := json.Marshal(tr.KeyStatus(host).Breaker); strings.Contains(string(js), "opened_at") || strings.Contains(string(js), "cause") {
			t.Errorf("a breaker that never opened: %s, want no opened_at nor cause", js)
		}
		trippedAt := time.Now()
		resp, err := tr.RoundTrip(keyedRequest(t, apiKey))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, resp); got != body {
			t.Errorf("the caller read %q, want the whole body %q", got, body)
		}
		time.Sleep(time.Minute)
		st := tr.KeyStatus(host).Breaker
		want := BreakerCause{StatusCode: 503, Class: Retryable, Detail: "upstream refused key REDACTED: overloaded"}
		if st.State != BreakerOpen || !st.OpenedAt.Equal(trippedAt) || st.Level != 0 || st.Cause != want || st.ResetIn != 59*time.Minute {
			t.Errorf("status = %+v, want open since %v at level 0 for 59m more, cause %+v", st, trippedAt, want)
		}
		js, _ := json.Marshal(st)
		for _, field := range []string{`"opened_at":"2000-01-01T00:00:00Z"`, `"cause":{"status":503,"class":"retryable","detail":"upstream refused key REDACTED: overloaded"}`, `"level":0`} {
			if !strings.Contains(string(js), field) {
				t.Errorf("JSON %s lacks %s", js, field)
			}
		}
	})
}

// The cause of a trip by network errors is the error's text, without
// the credentials it quotes; a long line is cut to valid UTF-8.
func TestBreakerCauseOfErrorsAndLongLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{err: errors.New("dial tcp: lookup api.example.com?token=planted-token: no such host")})
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 1})
		_, _ = callOnce(t, tr, context.Background())
		c := tr.KeyStatus(host).Breaker.Cause
		if c.StatusCode != 0 || c.Class != Final || strings.Contains(c.Detail, "planted-token") || !strings.Contains(c.Detail, "no such host") {
			t.Errorf("cause of a network error = %+v, want status 0, final, the error without its token", c)
		}

		long := strings.Repeat("é", 300) // 600 bytes, two per rune
		s = newScript(step{status: 500, header: http.Header{}, body: "\n\n  " + long})
		tr = breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 1})
		_, _ = callOnce(t, tr, context.Background())
		d := tr.KeyStatus(host).Breaker.Cause.Detail
		if len(d) != maxCauseDetail || !utf8.ValidString(d) || !strings.HasPrefix(long, d) {
			t.Errorf("detail of a long line: %d bytes, valid %v; want the line's first %d bytes, whole runes", len(d), utf8.ValidString(d), maxCauseDetail)
		}
	})
}

// A probe that hangs past ProbeTimeout opens the breaker again, and says
// so.
func TestBreakerCauseOfAProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := make(chan struct{})
		failing := true
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if failing {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			select {
			case <-hang:
			case <-req.Context().Done():
			}
			return nil, req.Context().Err()
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Minute, ProbeTimeout: 10 * time.Second})
		_, _ = callOnce(t, tr, context.Background())
		time.Sleep(time.Minute)
		failing = false
		ctx, cancel := context.WithCancel(context.Background())
		probe := goCallOnce(t, tr, ctx)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		st := tr.KeyStatus(host).Breaker
		if st.State != BreakerOpen || st.Cause.Detail != "the probe had no answer within 10s" || st.Cause.StatusCode != 0 {
			t.Errorf("after the probe hung: %+v, want open, caused by the probe's timeout", st)
		}
		cancel()
		<-probe
		close(hang)
	})
}

// youtube-remediation-plan.md, Phase 4 "structured logs" and Phase 2
// diagnostics: OnStateChange, the trace and the breaker_state event carry
// the level, when the breaker opened, for how long, and why.
func TestBreakerChangeCarriesTheCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var heard, traced []BreakerChange
		var logs bytes.Buffer
		s := newScript(step{status: 429, header: http.Header{"Retry-After": {"30"}}, body: `{"error":"quota exceeded"}`})
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithoutLearning(),
			WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))),
			WithTrace(&Trace{BreakerStateChanged: func(c BreakerChange) { mu.Lock(); traced = append(traced, c); mu.Unlock() }}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour,
				OnStateChange: func(c BreakerChange) { mu.Lock(); heard = append(heard, c); mu.Unlock() }}))
		opened := time.Now()
		_, _ = callOnce(t, tr, context.Background())
		want := BreakerChange{Key: host, From: BreakerClosed, To: BreakerOpen, Level: 0, OpenedAt: opened, ResetIn: time.Hour,
			Cause: BreakerCause{StatusCode: 429, Class: RateLimited, Detail: `{"error":"quota exceeded"}`}}
		mu.Lock()
		if len(heard) != 1 || heard[0] != want || len(traced) != 1 || traced[0] != want {
			t.Errorf("OnStateChange heard %+v, the trace %+v; want each %+v", heard, traced, want)
		}
		mu.Unlock()
		var event map[string]any
		first, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
		if err := json.Unmarshal(first, &event); err != nil {
			t.Fatalf("log %q: %v", logs.String(), err)
		}
		for k, v := range map[string]any{"event": "breaker_state", "level": "WARN", "to": "open", "breaker_level": 0.0,
			"reset_in_ms": 3.6e6, "opened_at": "2000-01-01T00:00:00Z", "cause_status": 429.0, "cause_class": "rate-limited",
			"cause_detail": `{"error":"quota exceeded"}`} {
			if event[k] != v {
				t.Errorf("breaker_state %s = %v, want %v", k, event[k], v)
			}
		}
	})
}

// youtube-remediation-plan.md, Phase 2 "Multi-instance: all backend
// instances share breaker state" and "Batch fail-fast:
// isCircuitBreakerBlocking()": a replica that sent nothing reports the
// breaker another replica opened, with when and why, in Blocking and
// KeyStatus.
func TestSharedBreakerShowsInEveryReplicasStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		policy := BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, Store: mem}
		failing := newScript(step{status: 503, header: http.Header{}, body: "backend overloaded\n"})
		a := breakerTransport(failing.mock(), policy)
		b := breakerTransport(newScript(answer(200)).mock(), policy)
		if blocked, _ := b.Blocking(host); blocked {
			t.Fatal("b blocked before anything happened")
		}
		opened := time.Now().Add(time.Second)
		_, _ = callOnce(t, a, context.Background())
		time.Sleep(time.Second)
		_, _ = callOnce(t, a, context.Background())
		time.Sleep(10 * time.Minute)

		blocked, d := b.Blocking(host)
		st := b.KeyStatus(host).Breaker
		if !blocked || d != 50*time.Minute {
			t.Errorf("b.Blocking = %v, %v; want true, 50m", blocked, d)
		}
		want := BreakerCause{StatusCode: 503, Class: Retryable, Detail: "backend overloaded"}
		if st.State != BreakerOpen || st.ResetIn != 50*time.Minute || !st.OpenedAt.Equal(opened) || st.Cause != want {
			t.Errorf("b's status = %+v, want open for 50m more, since %v, caused by %+v", st, opened, want)
		}
	})
}
