package ratewise

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests the rate_hint_unreadable event: a wait hint that could
// not be read is logged once per key, with its header and value, and the
// call goes on as it did without the log.

// logLines is a JSON log kept in memory (lockedLog), read back as
// records.
type logLines struct{ lockedLog }

func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// events returns the records of the event named event.
func (l *logLines) events(t *testing.T, event string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["event"] == event {
			out = append(out, rec)
		}
	}
	return out
}

// hintAt sends a GET to host through tr and returns the status and the
// time the call took.
func hintAt(t *testing.T, tr *Transport, host string) (int, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/items", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip to %s: %v", host, err)
	}
	readAll(t, resp)
	return resp.StatusCode, time.Since(start)
}

const otherHost = "other.example.com"

// A Retry-After that does not read is logged once per key, whatever the
// number of responses that carry it, with the header and the value read;
// the call backs off as it did before, with or without the log.
func TestUnreadableRetryAfterIsLoggedOncePerKey(t *testing.T) {
	for _, value := range []string{"soon", "-5", "3, 4"} {
		t.Run(value, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				refused := answer(429, "Retry-After", value)
				steps := []step{refused, answer(200), refused, answer(200), refused, answer(200), refused, answer(200)}
				policy := WithRetry(RetryPolicy{MaxAttempts: 2, InitialDelay: time.Second, Jitter: JitterNone})
				var log logLines
				logged, plain := newScript(steps...), newScript(steps...)
				withLog, without := New(logged.mock(), policy, WithLogger(log.logger())), New(plain.mock(), policy)
				if without.hintLog != nil {
					t.Fatal("a transport without WithLogger keeps a hint log")
				}
				hosts := []string{host, host, host, otherHost}
				for i, h := range hosts {
					status, took := hintAt(t, withLog, h)
					plainStatus, plainTook := hintAt(t, without, h)
					if status != 200 || plainStatus != 200 || took != plainTook {
						t.Errorf("call %d to %s: %d in %v with the log, %d in %v without; want 200 alike",
							i, h, status, took, plainStatus, plainTook)
					}
					if i == 0 && took != time.Second {
						t.Errorf("first call took %v, want the backoff of 1s: the hint is ignored", took)
					}
					want := 1
					if h == otherHost {
						want = 2
					}
					if n := len(log.events(t, "rate_hint_unreadable")); n != want {
						t.Errorf("after %d responses carrying Retry-After: %q, %d events; want %d, one per key", i+1, value, n, want)
					}
				}
				events := log.events(t, "rate_hint_unreadable")
				if len(events) != 2 {
					t.Fatalf("events %v; want one for each of two keys", events)
				}
				for i, key := range []string{host, otherHost} {
					e := events[i]
					if e["level"] != "WARN" || e["header"] != "Retry-After" || e["value"] != value ||
						e["status"] != float64(429) || e["key"] != key || e["msg"] != "wait hint unreadable: ignored" {
						t.Errorf("event %d = %v; want a Warn naming Retry-After, %q, status 429, key %s", i, e, value, key)
					}
				}
			})
		})
	}
}

// Many responses at once with a bad hint log it once.
func TestUnreadableHintFloodIsLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logLines
		s := newScript(answer(429, "Retry-After", "soon"))
		tr := New(s.mock(), WithLogger(log.logger()), WithRetry(RetryPolicy{MaxAttempts: 1}), WithoutLearning())
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if status, _ := hintAt(t, tr, host); status != 429 {
					t.Errorf("status %d, want the 429", status)
				}
			})
		}
		wg.Wait()
		if n := len(log.events(t, "rate_hint_unreadable")); n != 1 || s.calls() != 50 {
			t.Errorf("%d events for %d refusals with a bad hint, want 1", n, s.calls())
		}
	})
}

// The reset headers WaitHint reads are logged as Retry-After is, under
// their own names; a hint the call does not read (IgnoreRetryAfter, a
// reset with quota left, a final response) is not.
func TestUnreadableResetHintsAreLogged(t *testing.T) {
	for _, tt := range []struct {
		name       string
		policy     RetryPolicy
		answer     step
		wantHeader string // "" means no event
		wantValue  string
	}{
		{"x reset", RetryPolicy{}, answer(429, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon"), "X-Ratelimit-Reset", "soon"},
		{"draft reset", RetryPolicy{}, answer(429, "RateLimit-Remaining", "0", "RateLimit-Reset", "-5"), "Ratelimit-Reset", "-5"},
		{"structured", RetryPolicy{}, answer(429, "RateLimit", `"default";r=0;t=soon`), "Ratelimit", `"default";r=0;t=soon`},
		{"milliseconds", RetryPolicy{}, answer(429, "Retry-After-Ms", "soon"), "Retry-After-Ms", "soon"},
		{"503", RetryPolicy{}, answer(503, "Retry-After", "soon"), "Retry-After", "soon"},
		{"long value", RetryPolicy{}, answer(429, "Retry-After", strings.Repeat("x", 100)), "Retry-After", strings.Repeat("x", 64) + "..."},
		{"quota left", RetryPolicy{}, answer(429, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "soon"), "", ""},
		{"readable", RetryPolicy{}, answer(429, "Retry-After", "2"), "", ""},
		{"ignored", RetryPolicy{IgnoreRetryAfter: true}, answer(429, "Retry-After", "soon"), "", ""},
		{"final", RetryPolicy{}, answer(400, "Retry-After", "soon"), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var log logLines
				tt.policy.MaxAttempts = 1
				tr := New(newScript(tt.answer).mock(), WithLogger(log.logger()), WithRetry(tt.policy))
				hintAt(t, tr, host)
				events := log.events(t, "rate_hint_unreadable")
				switch {
				case tt.wantHeader == "" && len(events) != 0:
					t.Errorf("events %v, want none", events)
				case tt.wantHeader != "" && (len(events) != 1 || events[0]["header"] != tt.wantHeader || events[0]["value"] != tt.wantValue):
					t.Errorf("events %v, want one naming %s: %q", events, tt.wantHeader, tt.wantValue)
				}
			})
		})
	}
}

// The mark that a key was logged goes with the key's idleness, as the
// rest of its state does: memory stays bounded, and a key back after
// DefaultIdleTimeout is logged again.
func TestUnreadableHintMarkIsEvictedWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log logLines
		tr := New(newScript(answer(429, "Retry-After", "soon")).mock(), WithLogger(log.logger()),
			WithRetry(RetryPolicy{MaxAttempts: 1}), WithoutLearning())
		hintAt(t, tr, host)
		for i := range 3 { // three sweeps, which new keys bring, evict an idle key
			time.Sleep(DefaultIdleTimeout/2 + time.Second)
			hintAt(t, tr, "idle"+string(rune('a'+i))+".example.com")
		}
		if e := tr.hintLog.logged.Peek(host); e != nil {
			tr.hintLog.logged.Release(e)
			t.Fatalf("the mark of %s, idle for %v, is still kept", host, 3*(DefaultIdleTimeout/2+time.Second))
		}
		hintAt(t, tr, host)
		var keys []any
		for _, e := range log.events(t, "rate_hint_unreadable") {
			keys = append(keys, e["key"])
		}
		if len(keys) != 5 || keys[0] != host || keys[4] != host {
			t.Errorf("events for keys %v; want %s, the three others, then %s again", keys, host, host)
		}
	})
}

// Without WithLogger nothing is logged, not even to slog's default
// logger, and a bad hint is ignored as before.
func TestUnreadableHintWithoutLoggerLogsNothing(t *testing.T) {
	var log logLines
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(log.logger())
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "soon"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{InitialDelay: time.Second, Jitter: JitterNone}))
		ctx, stats := WithCallStats(context.Background())
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if err != nil || resp.StatusCode != 200 || stats.Attempts() != 2 || stats.Waited() != time.Second {
			t.Fatalf("RoundTrip = %v, %v after %d attempts, %v waited; want 200 after the 1s backoff", resp, err, stats.Attempts(), stats.Waited())
		}
		readAll(t, resp)
	})
	if events := log.events(t, "rate_hint_unreadable"); len(events) != 0 {
		t.Errorf("events %v without WithLogger, want none", events)
	}
}
