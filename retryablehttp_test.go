package ratewise

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

func newRetryableClient(base http.RoundTripper, p RetryPolicy) *retryablehttp.Client {
	client := retryablehttp.NewClient()
	client.HTTPClient = &http.Client{Transport: base}
	client.Logger = nil
	client.CheckRetry, client.Backoff = RetryablehttpPolicy(p)
	client.RetryMax = p.WithDefaults().MaxAttempts - 1 // as the doc says
	client.ErrorHandler = retryablehttp.PassthroughErrorHandler
	return client
}

func TestRetryablehttpPolicyHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(429, "Retry-After", "30"), step{status: 200, body: "ok"})
		client := newRetryableClient(s.mock(), RetryPolicy{})
		start := time.Now()
		resp, err := client.Get(testURL)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if body := readAll(t, resp); body != "ok" {
			t.Errorf("body = %q, want ok", body)
		}
		if got := time.Since(start); got != 60*time.Second {
			t.Errorf("elapsed = %v, want exactly 60s", got)
		}
		s.assertAllClosed(t)
	})
}

// youtube-remediation-plan.md, Phase 2: an anti-bot 200 is not retried
// through a retryablehttp client either.
func TestRetryablehttpPolicyDoesNotRetryBlocked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{status: 200, header: http.Header{}, body: "Sign in to confirm you're not a bot"})
		client := newRetryableClient(s.mock(), RetryPolicy{BlockPhrases: []string{"not a bot"}})
		resp, err := client.Get(testURL)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		readAll(t, resp)
		if s.calls() != 1 {
			t.Errorf("%d requests, want 1: a Blocked answer is not retried", s.calls())
		}
	})
}

func TestRetryablehttpPolicyFullJitterBackoff(t *testing.T) {
	_, backoff := RetryablehttpPolicy(RetryPolicy{InitialDelay: time.Second})
	for range 1000 {
		// retryablehttp's own min and max must not matter.
		if d := backoff(time.Hour, 2*time.Hour, 2, nil); d < 0 || d > 4*time.Second {
			t.Fatalf("backoff(retry 2) = %v, want within [0, 4s]", d)
		}
	}
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"90"}}}
	if d := backoff(0, 0, 0, resp); d != 90*time.Second {
		t.Errorf("backoff with Retry-After 90 = %v, want 90s, above MaxDelay", d)
	}
}

func TestRetryablehttpPolicyDecisions(t *testing.T) {
	certErr := errors.New("tls: failed to verify certificate: x509: certificate is not trusted")
	tests := []struct {
		name      string
		method    string
		steps     []step
		policy    RetryPolicy
		wantCalls int
		wantErr   bool
	}{
		{name: "404 final", method: "GET", steps: []step{answer(404), answer(200)}, wantCalls: 1},
		{name: "GET 500 retried", method: "GET", steps: []step{answer(500), answer(200)}, wantCalls: 2},
		{name: "POST 500 final", method: "POST", steps: []step{answer(500), answer(200)}, wantCalls: 1},
		{name: "501 final", method: "GET", steps: []step{answer(501), answer(200)}, wantCalls: 1},
		{name: "429 retried", method: "GET", steps: []step{answer(429, "Retry-After", "1"), answer(200)}, wantCalls: 2},
		{name: "phrase retried", method: "GET", policy: RetryPolicy{RateLimitPhrases: []string{"slow down"}},
			steps: []step{{status: 400, body: "please SLOW DOWN"}, answer(200)}, wantCalls: 2},
		{name: "hint past the cap stops", method: "GET", steps: []step{answer(429, "Retry-After", "3600"), answer(200)}, wantCalls: 1},
		{name: "GET network error retried", method: "GET", steps: []step{{err: errReset}, answer(200)}, wantCalls: 2},
		{name: "POST network error not retried", method: "POST", steps: []step{{err: errReset}, answer(200)}, wantCalls: 1, wantErr: true},
		{name: "certificate error not retried", method: "GET", steps: []step{{err: certErr}, answer(200)}, wantCalls: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.steps...)
				client := newRetryableClient(s.mock(), tt.policy)
				req, err := retryablehttp.NewRequest(tt.method, testURL, strings.NewReader("x"))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if (err != nil) != tt.wantErr {
					t.Fatalf("Do error = %v, want error %v", err, tt.wantErr)
				}
				if err == nil {
					readAll(t, resp)
				}
				if s.calls() != tt.wantCalls {
					t.Errorf("server calls = %d, want %d", s.calls(), tt.wantCalls)
				}
			})
		})
	}
}

func TestRetryablehttpPolicyStopsOnCancelledContext(t *testing.T) {
	checkRetry, _ := RetryablehttpPolicy(RetryPolicy{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if retry, err := checkRetry(ctx, &http.Response{StatusCode: 429}, nil); retry || !errors.Is(err, context.Canceled) {
		t.Errorf("checkRetry on a cancelled context = %v, %v; want false, context.Canceled", retry, err)
	}
}
