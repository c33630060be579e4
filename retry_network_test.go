package ratewise

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests retries after network errors: only idempotent or keyed
// requests, never permanent errors, within the deadline and the retry
// budget.

var errReset = &netError{syscall.ECONNRESET}

type netError struct{ err error }

func (e *netError) Error() string { return "read tcp: " + e.err.Error() }

func (e *netError) Unwrap() error { return e.err }

func TestNetworkErrors(t *testing.T) {
	certErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	tests := []struct {
		name      string
		method    string
		header    http.Header
		policy    RetryPolicy
		steps     []step
		wantCalls int
		wantErr   error // nil: success wanted
	}{
		{name: "GET retried", method: "GET", steps: []step{{err: errReset}, {err: errReset}, answer(200)}, wantCalls: 3},
		{name: "GET gives up after NetworkRetries", method: "GET", steps: []step{{err: errReset}}, wantCalls: 3, wantErr: syscall.ECONNRESET},
		{name: "NoNetworkRetries", method: "GET", policy: RetryPolicy{NetworkRetries: NoNetworkRetries},
			steps: []step{{err: errReset}, answer(200)}, wantCalls: 1, wantErr: syscall.ECONNRESET},
		{name: "PUT retried", method: "PUT", steps: []step{{err: errReset}, answer(200)}, wantCalls: 2},
		{name: "POST not retried", method: "POST", steps: []step{{err: errReset}, answer(200)}, wantCalls: 1, wantErr: syscall.ECONNRESET},
		{name: "PATCH not retried", method: "PATCH", steps: []step{{err: errReset}, answer(200)}, wantCalls: 1, wantErr: syscall.ECONNRESET},
		{name: "POST with Idempotency-Key retried", method: "POST", header: http.Header{"Idempotency-Key": {"k1"}},
			steps: []step{{err: errReset}, answer(200)}, wantCalls: 2},
		{name: "certificate error not retried", method: "GET", steps: []step{{err: certErr}, answer(200)}, wantCalls: 1, wantErr: certErr},
		{name: "wrapped certificate error not retried", method: "GET",
			steps: []step{{err: &net.OpError{Op: "proxyconnect", Net: "tcp", Err: certErr}}, answer(200)}, wantCalls: 1, wantErr: certErr},
		{name: "MaxAttempts bounds network retries", method: "GET", policy: RetryPolicy{MaxAttempts: 2, NetworkRetries: 10},
			steps: []step{{err: errReset}}, wantCalls: 2, wantErr: syscall.ECONNRESET},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.steps...)
				req := mustRequest(t, tt.method, strings.NewReader("payload"))
				for k, v := range tt.header {
					req.Header[k] = v
				}
				resp, err := New(s.mock(), WithRetry(tt.policy)).RoundTrip(req)
				if tt.wantErr == nil {
					if err != nil {
						t.Fatalf("RoundTrip: %v", err)
					}
					readAll(t, resp)
				} else if resp != nil || !errors.Is(err, tt.wantErr) {
					t.Fatalf("RoundTrip = %v, %v; want nil, %v", resp, err, tt.wantErr)
				}
				if s.calls() != tt.wantCalls {
					t.Errorf("server calls = %d, want %d", s.calls(), tt.wantCalls)
				}
			})
		})
	}
}

func TestUnsupportedSchemeNotRetried(t *testing.T) {
	ctx, stats := WithCallStats(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "gopher://example.com/", nil)
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	_, err := New(base).RoundTrip(req)
	if err == nil || !strings.Contains(err.Error(), "unsupported protocol scheme") {
		t.Fatalf("err = %v, want unsupported protocol scheme", err)
	}
	if stats.Attempts() != 1 {
		t.Errorf("attempts = %d, want 1", stats.Attempts())
	}
}

func TestNetworkRetryWaitOutlivingDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{err: errReset}, answer(200))
		p := RetryPolicy{InitialDelay: 10 * time.Second, Jitter: JitterNone}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := New(s.mock(), WithRetry(p)).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("err = %v, want DeadlineExceeded wrapping the reset", err)
		}
		if s.calls() != 1 {
			t.Errorf("server calls = %d, want 1", s.calls())
		}
	})
}

func TestNetworkRetryBudgetExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(step{err: errReset}, answer(200))
		ctx := WithBudget(context.Background(), 0)
		_, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if !errors.Is(err, ErrBudgetExhausted) || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("err = %v, want ErrBudgetExhausted wrapping the reset", err)
		}
	})
}
