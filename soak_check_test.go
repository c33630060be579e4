package ratewise_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// This file is the soak's verdict: every call ended, every body whole,
// nothing held, no secret in any text the library wrote.

// checkBody is the server's OnRequest: every attempt's body must match
// the checksum its caller computed before the first attempt.
func (s *soak) checkBody(r *http.Request, body []byte) {
	sum := sha256.Sum256(body)
	s.bodiesChecked.Add(1)
	if hex.EncodeToString(sum[:]) != r.Header.Get("X-Body-SHA256") {
		s.bodiesCorrupt.Add(1)
	}
}

// check asserts the rules over the whole run.
func (s *soak) check(t *testing.T) {
	// Every call ended with a response or a typed error, and no call hung.
	for outcome, n := range s.outcomes {
		if strings.HasPrefix(outcome, "error: untyped") || strings.Contains(outcome, "hang") || strings.Contains(outcome, "wrong body") {
			t.Errorf("%d calls ended as %q", n, outcome)
		}
	}
	if got := s.outcomes["response: 200"]; got < s.calls/2 {
		t.Errorf("only %d of %d calls got a 200: the stack is not getting work done", got, s.calls)
	}

	// Bodies: every one the base handed out was closed.
	if opened, closed := s.base.opened.Load(), s.base.closed.Load(); opened != closed || opened == 0 {
		t.Errorf("the base returned %d bodies and %d were closed", opened, closed)
	}
	// Connections: none left open once idle ones are closed.
	s.tr.CloseIdleConnections()
	waitFor(func() bool { return s.conns.open.Load() == 0 })
	if open := s.conns.open.Load(); open != 0 {
		t.Errorf("%d connections still open after CloseIdleConnections (%d dialed)", open, s.conns.dialed.Load())
	}

	// Bodies arrived intact on every attempt.
	if checked, corrupt := s.bodiesChecked.Load(), s.bodiesCorrupt.Load(); corrupt != 0 || checked == 0 {
		t.Errorf("%d of %d request bodies reached the server changed", corrupt, checked)
	}

	// The rules: no non-idempotent retry after a network error, nothing
	// sent into a running cooldown or an open breaker.
	s.problems = append(s.problems, s.base.problems()...)
	s.problems = append(s.problems, s.obs.breaches()...)
	if len(s.problems) > 0 {
		t.Errorf("%d rule breaches, the first: %q", len(s.problems), s.problems[:min(5, len(s.problems))])
	}

	s.checkSecrets(t)

	stats := s.tr.Stats()
	s.srv.Close()
	goleak.VerifyNone(t)

	st := s.srv.Stats()
	outcomes, _ := json.Marshal(s.outcomes)
	t.Logf("soak: %d calls (%d fan-outs of 3) from %d goroutines, %d attempts, %d retries; server: %d requests, %d faults injected, %d limited by its bucket; client: %d network errors, %d pauses, %d breaker opens; %d bodies checked; peak %d goroutines, peak heap %.1f MiB",
		s.calls, s.outcomes["fan-out: complete"]+s.outcomes["fan-out: partial"]+s.outcomes["fan-out: primary failed"], soakWorkers,
		stats.Attempts, stats.Retries, st.Received, st.Faults, st.Limited,
		s.base.netErrors.Load(), s.obs.pauseCount(), s.obs.openCount(), s.bodiesChecked.Load(),
		s.peakGoroutines, float64(s.peakHeap)/(1<<20))
	t.Logf("soak outcomes: %s", outcomes)
}

// checkSecrets scans everything the run reported for the planted secrets.
func (s *soak) checkSecrets(t *testing.T) {
	var metricsText []string
	for _, v := range []any{s.tr.Stats(), s.tr.BreakerStatuses()} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		metricsText = append(metricsText, string(b))
	}
	for i := range soakHosts {
		b, _ := json.Marshal(s.tr.KeyStatus(soakHost(i)))
		metricsText = append(metricsText, string(b), fmt.Sprintf("%+v", s.tr.KeyStatus(soakHost(i))))
	}
	sources := map[string][]string{
		"log line":      strings.Split(s.logs.String(), "\n"),
		"error":         s.reported,
		"metric":        metricsText,
		"trace event":   s.obs.texts(),
		"stats' errors": {s.tr.Stats().LastError},
	}
	for kind, texts := range sources {
		if len(texts) == 0 || len(texts) == 1 && texts[0] == "" {
			t.Errorf("the soak produced no %s to scan", kind)
		}
		leaks, first := 0, ""
		for _, text := range texts {
			for _, secret := range []string{soakAPIKey, soakBearer, soakToken} {
				if strings.Contains(text, secret) {
					if leaks == 0 {
						first = text
					}
					leaks++
				}
			}
		}
		if leaks > 0 {
			t.Errorf("%d of %d %ss show a secret, the first: %.300q", leaks, len(texts), kind, first)
		}
	}
}
