package ratewise

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests the slog events of WithLogger: what they say, that none
// shows a secret, and that nothing is built when the logger is off; and
// Redact.

func TestLoggerEventsAndNoSecrets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		s := newScript(answer(429, "Retry-After", "1"), answer(429, "Retry-After", "2"), answer(200))
		// The breaker trips on the third failure in a row: the failing call's
		// attempt and its two network retries.
		tr := New(s.mock(), WithLogger(logger), WithRetry(RetryPolicy{Jitter: JitterNone, InitialDelay: time.Millisecond}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 3}))
		secrets := []string{"planted-api-key", "planted-bearer-token", "planted-query-token", "hunter22"}
		request := func() *http.Request {
			req, _ := http.NewRequestWithContext(WithEndpoint(context.Background(), "comments"), http.MethodGet,
				"https://bob:hunter22@api.example.com/items?token=planted-query-token&page=2", nil)
			req.Header.Set("apikey", "planted-api-key")
			req.Header.Set("Authorization", "Bearer planted-bearer-token")
			return req
		}
		resp, err := tr.RoundTrip(request())
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		// A base that quotes the URL and the header in its error.
		s.reset(step{err: errors.New("proxy refused https://bob:hunter22@api.example.com/items?token=planted-query-token with apikey planted-api-key")})
		if _, err := tr.RoundTrip(request()); err == nil {
			t.Fatal("no error from the failing base")
		}
		out := buf.String()
		for _, secret := range secrets {
			if strings.Contains(out, secret) {
				t.Errorf("log shows %q:\n%s", secret, out)
			}
		}
		var events []map[string]any
		for line := range strings.Lines(out) {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("not JSON: %q", line)
			}
			events = append(events, m)
		}
		find := func(event string) map[string]any {
			for _, m := range events {
				if m["event"] == event {
					return m
				}
			}
			t.Fatalf("no %s event in\n%s", event, out)
			return nil
		}
		retry := find("rate_retry")
		if retry["attempt"] != 1.0 || retry["max"] != 5.0 || retry["delay_ms"] != 1000.0 || retry["reason"] != "429" ||
			retry["endpoint"] != "comments" || retry["key"] != "api.example.com" || retry["level"] != "INFO" {
			t.Errorf("rate_retry = %v", retry)
		}
		wait := find("rate_wait")
		if wait["kind"] != "backoff" || wait["delay_ms"] != 1000.0 || wait["msg"] != "Throttling: waiting 1000ms before next request" {
			t.Errorf("rate_wait = %v", wait)
		}
		success := find("rate_success")
		if success["attempts"] != 3.0 || success["total_wait_ms"] != 3000.0 || success["status"] != 200.0 {
			t.Errorf("rate_success = %v", success)
		}
		giveUp := find("rate_giveup")
		if giveUp["reason"] != "network" || giveUp["level"] != "WARN" || !strings.Contains(giveUp["error"].(string), "proxy refused") {
			t.Errorf("rate_giveup = %v", giveUp)
		}
		breaker := find("breaker_state")
		if breaker["from"] != "closed" || breaker["to"] != "open" || breaker["key"] != "api.example.com" {
			t.Errorf("breaker_state = %v", breaker)
		}
	})
}

func TestLoggerOffBuildsNothing(t *testing.T) {
	var built int
	handler := countingHandler{built: &built}
	// Warn and above only: the Info and Debug events are not built.
	tr := New(newScript(answer(200)).mock(), WithLogger(slog.New(handler)))
	for range 10 {
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	if built != 0 {
		t.Errorf("%d records built for disabled levels, want none", built)
	}
}

type countingHandler struct{ built *int }

func (h countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h countingHandler) Handle(context.Context, slog.Record) error { *h.built++; return nil }

func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h countingHandler) WithGroup(string) slog.Handler { return h }

func TestRedact(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://u:pw-1234@api.example.com/x?api_key=k-5678&q=books", nil)
	req.Header.Set("X-Api-Key", "header-key-9")
	req.Header.Set("Authorization", "Bearer tok-abcdef")
	for _, tt := range []struct{ give, want string }{
		{"GET https://u:pw-1234@api.example.com/x?api_key=k-5678&q=books: refused",
			"GET https://REDACTED@api.example.com/x?api_key=REDACTED&q=books: refused"},
		{"sent header-key-9 and tok-abcdef", "sent REDACTED and REDACTED"},
		{"elsewhere https://a:b@h/?access_token=zzz9 and Bearer other-token", "elsewhere https://REDACTED@h/?access_token=REDACTED and Bearer REDACTED"},
		{"nothing secret here", "nothing secret here"},
	} {
		if got := Redact(tt.give, req); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.give, got, tt.want)
		}
	}
	if got := Redact("x?token=abcd", nil); got != "x?token=REDACTED" {
		t.Errorf("Redact without a request = %q", got)
	}
}
