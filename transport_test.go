package ratewise

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestRetryAfterSecondsHonouredExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(
			answer(429, "Retry-After", "30"),
			answer(429, "Retry-After", "30"),
			answer(200),
		)
		start := time.Now()
		r := s.get(t, context.Background(), RetryPolicy{})
		if r.status != 200 {
			t.Errorf("status = %d, want 200", r.status)
		}
		if r.elapsed != 60*time.Second {
			t.Errorf("elapsed = %v, want exactly 60s", r.elapsed)
		}
		if got, want := s.offsets(start), []time.Duration{0, 30 * time.Second, 60 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("requests arrived at %v, want %v", got, want)
		}
		stats := r.stats
		if stats.Attempts() != 3 || stats.RateLimitHits() != 2 || stats.Waited() != 60*time.Second || stats.LastStatus() != 200 {
			t.Errorf("stats = attempts %d, hits %d, waited %v, last %d; want 3, 2, 60s, 200",
				stats.Attempts(), stats.RateLimitHits(), stats.Waited(), stats.LastStatus())
		}
	})
}

func TestRetryAfterHTTPDateHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := newScript(
			answer(429, "Retry-After", start.Add(45*time.Second).UTC().Format(http.TimeFormat)),
			answer(200),
		)
		if r := s.get(t, context.Background(), RetryPolicy{}); r.elapsed != 45*time.Second {
			t.Errorf("elapsed = %v, want 45s", r.elapsed)
		}
	})
}

func TestRateLimitResetHeadersUsedWithoutRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		s := newScript(
			answer(429, "X-RateLimit-Reset", "20"),
			answer(429, "RateLimit", `"default";r=0;t=15`),
			answer(200),
		)
		s.get(t, context.Background(), RetryPolicy{})
		if got, want := s.offsets(start), []time.Duration{0, 20 * time.Second, 35 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("requests arrived at %v, want %v", got, want)
		}
	})
}

func TestHintLongerThanBudgetReturnsAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		policy RetryPolicy
		ctx    func() (context.Context, context.CancelFunc)
	}{
		{name: "TotalWaitCap", policy: RetryPolicy{TotalWaitCap: 2 * time.Minute}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		}},
		{name: "WithBudget", policy: RetryPolicy{TotalWaitCap: time.Hour}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithCancel(WithBudget(context.Background(), 90*time.Second))
		}},
		{name: "context deadline", policy: RetryPolicy{TotalWaitCap: time.Hour}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Second)
		}},
		{name: "context deadline at the hint", policy: RetryPolicy{TotalWaitCap: time.Hour}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 600*time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, "Retry-After", "600"), answer(200))
				ctx, cancel := tt.ctx()
				defer cancel()
				start := time.Now()
				resp, err := New(s.mock(), WithRetry(tt.policy)).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				if resp.StatusCode != 429 {
					t.Errorf("status = %d, want the 429", resp.StatusCode)
				}
				if body := readAll(t, resp); body != http.StatusText(http.StatusTooManyRequests) {
					t.Errorf("body = %q, want the server's body intact", body)
				}
				if elapsed := time.Since(start); elapsed != 0 {
					t.Errorf("elapsed = %v, want 0: no wait may start", elapsed)
				}
				if s.calls() != 1 {
					t.Errorf("server calls = %d, want 1", s.calls())
				}
			})
		})
	}
}

func TestTotalWaitCapStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		p := RetryPolicy{MaxAttempts: 100, InitialDelay: time.Second, MaxDelay: 10 * time.Second,
			Jitter: JitterNone, TotalWaitCap: 25 * time.Second}
		r := s.get(t, context.Background(), p)
		// Waits 1+2+4+8+10 = 25s fit the cap exactly; the next 10s does not.
		if r.elapsed != 25*time.Second || r.stats.Attempts() != 6 || r.stats.Waited() != 25*time.Second {
			t.Errorf("elapsed %v, attempts %d, waited %v; want 25s, 6, 25s", r.elapsed, r.stats.Attempts(), r.stats.Waited())
		}
	})
}

func TestTotalWaitCapNeverExceededWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 20 * time.Second
		p := RetryPolicy{MaxAttempts: 50, InitialDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second, TotalWaitCap: limit}
		tr := New(nil, WithRetry(p), WithoutLearning()) // the retry layer's waits alone
		for i := range 200 {
			s := newScript(answer(429), answer(429, "Retry-After", "3"), answer(503, "Retry-After", "1"))
			tr.base = s.mock()
			ctx, stats := WithCallStats(context.Background())
			start := time.Now()
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if err != nil {
				t.Fatalf("run %d: RoundTrip: %v", i, err)
			}
			readAll(t, resp)
			if elapsed := time.Since(start); elapsed > limit || stats.Waited() > limit {
				t.Fatalf("run %d: elapsed %v, waited %v; cap is %v", i, elapsed, stats.Waited(), limit)
			}
			if stats.Attempts() < 2 {
				t.Fatalf("run %d: attempts = %d, want retries inside the cap", i, stats.Attempts())
			}
		}
	})
}

func TestSharedBudgetAcrossConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(429, "Retry-After", "30"), answer(200))
		// Without the cooldown gate or a learned window, which would hold
		// the second call.
		tr := New(s.mock(), WithCooldown(CooldownPolicy{Off: true}), WithoutLearning())
		ctx := WithBudget(context.Background(), 40*time.Second)
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range statuses {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 20 * time.Second) // the second call comes 20s later
				resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
				if err != nil {
					t.Errorf("RoundTrip: %v", err)
					return
				}
				readAll(t, resp)
				statuses[i] = resp.StatusCode
			})
		}
		wg.Wait()
		slices.Sort(statuses)
		// Both got a 429 asking for 30s: the first waits 0-30s, the second
		// would wait 20-50s, 20s more than the 10s the budget has left.
		if !slices.Equal(statuses, []int{200, 429}) {
			t.Errorf("statuses = %v, want one 200 and one 429", statuses)
		}
		if left, ok := BudgetLeft(ctx); !ok || left != 10*time.Second {
			t.Errorf("BudgetLeft = %v, %v; want 10s, true", left, ok)
		}
	})
}

func TestCancelDuringWaitReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Second, cancel)
		start := time.Now()
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if resp != nil {
			t.Errorf("resp = %v, want nil with an error", resp.Status)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("returned after %v, want at the cancel, 10s", got)
		}
		s.assertAllClosed(t)
	})
}

func TestCancelGivesBackSharedBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"))
		budgetCtx := WithBudget(context.Background(), time.Minute)
		ctx, cancel := context.WithTimeoutCause(budgetCtx, 40*time.Second, errors.New("unused"))
		defer cancel()
		time.AfterFunc(10*time.Second, cancel)
		_, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if left, _ := BudgetLeft(budgetCtx); left != 50*time.Second {
			t.Errorf("budget left = %v, want 50s: 10s spent, 20s given back", left)
		}
	})
}

func TestBodyReplayedOnEveryAttempt(t *testing.T) {
	payload := strings.Repeat("ratewise-", 1000)
	tests := []struct {
		name   string
		body   func() io.Reader
		length int64 // ContentLength to set, when not 0
	}{
		{name: "GetBody", body: func() io.Reader { return strings.NewReader(payload) }},
		// No GetBody, but a known length: buffered.
		{name: "buffered", body: func() io.Reader { return io.MultiReader(strings.NewReader(payload)) }, length: int64(len(payload))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, "Retry-After", "1"), answer(503, "Retry-After", "1"), answer(201))
				req := mustRequest(t, http.MethodPost, tt.body())
				req.Header.Set("Content-Type", "text/plain")
				if tt.length != 0 {
					req.ContentLength = tt.length
				}
				before := snapshot(req)

				resp, err := New(s.mock()).RoundTrip(req)
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readAll(t, resp)
				if resp.StatusCode != 201 {
					t.Fatalf("status = %d, want 201", resp.StatusCode)
				}
				if len(s.bodies) != 3 {
					t.Fatalf("server got %d requests, want 3", len(s.bodies))
				}
				for i, got := range s.bodies {
					if string(got) != payload {
						t.Errorf("attempt %d body: %d bytes, want the %d bytes sent", i+1, len(got), len(payload))
					}
				}
				if after := snapshot(req); !reflect.DeepEqual(before, after) {
					t.Errorf("request changed:\nbefore %+v\nafter  %+v", before, after)
				}
			})
		})
	}
}

// requestView is what the caller sees of a request, to check RoundTrip
// leaves it alone.
type requestView struct {
	Method, URL   string
	Header        http.Header
	ContentLength int64
	Body          io.ReadCloser
	HasGetBody    bool
}

func snapshot(req *http.Request) requestView {
	return requestView{req.Method, req.URL.String(), req.Header.Clone(), req.ContentLength, req.Body, req.GetBody != nil}
}

func TestBodyNotBufferedGetsOneAttempt(t *testing.T) {
	payload := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		length int64
	}{
		{name: "longer than MaxBufferedBody", length: int64(len(payload))},
		{name: "unknown length", length: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, "Retry-After", "1"), answer(200))
				body := &closeRecorder{Reader: strings.NewReader(payload)}
				req := mustRequest(t, http.MethodPost, body)
				req.ContentLength = tt.length
				resp, err := New(s.mock(), WithRetry(RetryPolicy{MaxBufferedBody: 10})).RoundTrip(req)
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readAll(t, resp)
				if resp.StatusCode != 429 || s.calls() != 1 {
					t.Errorf("status %d after %d calls, want the 429 after 1", resp.StatusCode, s.calls())
				}
				if string(s.bodies[0]) != payload {
					t.Errorf("server got %q, want the whole body", s.bodies[0])
				}
			})
		})
	}
}

func TestStreamingBodyIsNotReadAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A body that yields its data only after a while: the transport
		// must hand it to the base at once instead of reading it first.
		pr, pw := io.Pipe()
		go func() {
			time.Sleep(time.Minute)
			_, _ = pw.Write([]byte("late"))
			_ = pw.Close()
		}()
		var sentAt time.Duration
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sentAt = time.Since(start)
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		if _, err := New(base).RoundTrip(mustRequest(t, http.MethodPost, pr)); err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if sentAt != 0 {
			t.Errorf("request reached the base after %v, want at once", sentAt)
		}
	})
}

func TestDiscardedBodiesAreClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429), answer(429, "Retry-After", "2"), answer(503, "Retry-After", "1"), answer(429), answer(200))
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if opened, closed := s.closed(); opened != 5 || closed != 4 {
			t.Errorf("before the caller closes: %d opened, %d closed; want 5, 4", opened, closed)
		}
		if body := readAll(t, resp); body != "OK" {
			t.Errorf("final body = %q, want OK", body)
		}
		s.assertAllClosed(t)
	})
}

func TestMaxAttemptsReturnsLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		ctx, stats := WithCallStats(context.Background())
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if resp.StatusCode != 429 || s.calls() != DefaultMaxAttempts || stats.Attempts() != DefaultMaxAttempts {
			t.Errorf("status %d, server calls %d, attempts %d; want 429, %d, %d",
				resp.StatusCode, s.calls(), stats.Attempts(), DefaultMaxAttempts, DefaultMaxAttempts)
		}
		var rle *RateLimitError
		if err := CheckResponse(resp); !errors.As(err, &rle) || rle.Attempts != DefaultMaxAttempts || rle.RetryAfter != time.Second {
			t.Errorf("CheckResponse = %v, want a RateLimitError with %d attempts and RetryAfter 1s", err, DefaultMaxAttempts)
		}
		if body := readAll(t, resp); body != http.StatusText(http.StatusTooManyRequests) {
			t.Errorf("body = %q after CheckResponse, want it intact", body)
		}
	})
}

func TestFinalResponsesAreNotRetried(t *testing.T) {
	for _, status := range []int{200, 204, 301, 400, 401, 403, 404, 500, 502, 503, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(status), answer(200))
				if r := s.get(t, context.Background(), RetryPolicy{}); r.status != status || s.calls() != 1 {
					t.Errorf("status %d after %d calls, want %d after 1", r.status, s.calls(), status)
				}
			})
		})
	}
}

func TestClassifyHookAndPhrases(t *testing.T) {
	bigBody := "Please confirm you're NOT A BOT. " + strings.Repeat("padding ", 2000)
	tests := []struct {
		name   string
		policy RetryPolicy
		first  step
		want   int // server calls
	}{
		{name: "hook retries 502", policy: RetryPolicy{Classify: func(r *http.Response) Class {
			if r.StatusCode == http.StatusBadGateway {
				return Retryable
			}
			return DefaultClassify(r)
		}}, first: answer(502), want: 2},
		{name: "hook keeps 429 final", policy: RetryPolicy{Classify: func(*http.Response) Class { return Final }},
			first: answer(429), want: 1},
		{name: "phrase in 403 body", policy: RetryPolicy{RateLimitPhrases: []string{"confirm you're not a bot"}},
			first: step{status: 403, body: bigBody}, want: 2},
		{name: "phrase past 4 KiB ignored", policy: RetryPolicy{RateLimitPhrases: []string{"needle"}},
			first: step{status: 403, body: strings.Repeat("x", 5000) + "needle"}, want: 1},
		{name: "phrase in 200 ignored", policy: RetryPolicy{RateLimitPhrases: []string{"rate limit"}},
			first: step{status: 200, body: "rate limit docs"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.first, step{status: 200, body: "done"})
				r := s.get(t, context.Background(), tt.policy)
				if s.calls() != tt.want {
					t.Errorf("server calls = %d, want %d", s.calls(), tt.want)
				}
				if tt.want == 1 && r.body != tt.first.body {
					t.Errorf("final body has %d bytes, want all %d of the server's", len(r.body), len(tt.first.body))
				}
			})
		})
	}
}

func TestIgnoreRetryAfterUsesBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "60"), answer(200))
		p := RetryPolicy{IgnoreRetryAfter: true, InitialDelay: 2 * time.Second, Jitter: JitterNone}
		if r := s.get(t, context.Background(), p); r.elapsed != 2*time.Second {
			t.Errorf("elapsed = %v, want the 2s backoff", r.elapsed)
		}
	})
}

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

func TestInvalidPolicyFailsEveryRoundTrip(t *testing.T) {
	s := newScript(answer(200))
	tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: -1, Multiplier: 0.5}))
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req := mustRequest(t, http.MethodPost, body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || err == nil {
		t.Fatalf("RoundTrip = %v, %v; want an error", resp, err)
	}
	for _, want := range []string{"MaxAttempts (-1)", "Multiplier (0.5)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if !body.closed || s.calls() != 0 {
		t.Errorf("body closed %v, server calls %d; want true, 0", body.closed, s.calls())
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestBrokenBaseReturningNothing(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, nil })
	resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil))
	if resp != nil || !errors.Is(err, errNoResponse) || calls != 1 {
		t.Errorf("RoundTrip = %v, %v after %d calls; want nil, errNoResponse after 1", resp, err, calls)
	}
}

func TestBrokenBaseReturningResponseAndError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, _ := s.respond(r)
			return resp, errReset
		})
		// With no budget the retry is refused: the call must still end with
		// the error, not the response the base closed.
		ctx := WithBudget(context.Background(), 0)
		resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if resp != nil || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("RoundTrip = %v, %v; want nil and the error", resp, err)
		}
		s.assertAllClosed(t)
	})
}

func TestGetBodyFailureKeepsResponseAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		req := mustRequest(t, http.MethodPost, strings.NewReader("payload"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
		ctx := WithBudget(context.Background(), time.Minute)
		resp, err := New(s.mock()).RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if body := readAll(t, resp); resp.StatusCode != 429 || body != http.StatusText(http.StatusTooManyRequests) {
			t.Errorf("got %d %q, want the 429 with its body", resp.StatusCode, body)
		}
		if left, _ := BudgetLeft(ctx); left != time.Minute {
			t.Errorf("budget left = %v, want all of it, 1m", left)
		}
	})
}

// endlessBody is a response body that never ends; it counts what was read.
type endlessBody struct {
	read   int64
	closed bool
}

func (b *endlessBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	b.read += int64(len(p))
	return len(p), nil
}

func (b *endlessBody) Close() error { b.closed = true; return nil }

func TestDiscardedBodyDrainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		endless := &endlessBody{}
		calls := 0
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: endless}, nil
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want the 200", resp, err)
		}
		if !endless.closed || endless.read > maxDrain+32<<10 {
			t.Errorf("discarded endless body: closed %v after reading %d bytes; want closed after at most about %d",
				endless.closed, endless.read, maxDrain)
		}
	})
}

func TestRetryableClassHonoursHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(502, "Retry-After", "7"), answer(200))
		p := RetryPolicy{Classify: func(r *http.Response) Class {
			if r.StatusCode == http.StatusBadGateway {
				return Retryable
			}
			return DefaultClassify(r)
		}}
		if r := s.get(t, context.Background(), p); r.elapsed != 7*time.Second || r.stats.RateLimitHits() != 0 {
			t.Errorf("elapsed %v, rate-limit hits %d; want 7s and 0 (a 502 is no rate limit)", r.elapsed, r.stats.RateLimitHits())
		}
	})
}

func TestHugeMaxDelayNeverWaitsNegative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		p := RetryPolicy{MaxAttempts: 4, Jitter: JitterNone, Multiplier: 1e12, MaxDelay: math.MaxInt64, TotalWaitCap: math.MaxInt64}
		// 1s, then 10^12 s: the second wait cannot fit what is left.
		if r := s.get(t, context.Background(), p); r.elapsed != time.Second || s.calls() != 2 {
			t.Errorf("elapsed %v after %d calls, want 1s after 2", r.elapsed, s.calls())
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type idleCloser struct {
	http.RoundTripper
	closes int
}

func (c *idleCloser) CloseIdleConnections() { c.closes++ }

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &idleCloser{}
	New(base).CloseIdleConnections()
	if base.closes != 1 {
		t.Errorf("base CloseIdleConnections called %d times, want 1", base.closes)
	}
	New(roundTripFunc(nil)).CloseIdleConnections() // a base without the method: no panic
}

func TestNewNilBaseUsesDefaultTransport(t *testing.T) {
	if tr := New(nil); tr.base != http.DefaultTransport {
		t.Errorf("base = %T, want http.DefaultTransport", tr.base)
	}
}

func TestWorksInsideHTTPClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "3"), step{status: 200, body: "hello"})
		client := &http.Client{Transport: New(s.mock())}
		resp, err := client.Get(testURL)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if body := readAll(t, resp); body != "hello" {
			t.Errorf("body = %q, want hello", body)
		}
	})
}

func TestRequestWithoutURLFailsAtOnce(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, errors.New("no URL") })
	_, err := New(base).RoundTrip(&http.Request{Method: http.MethodGet, Header: http.Header{}})
	if err == nil || calls != 0 {
		t.Errorf("RoundTrip = %v after %d base calls, want an error and none", err, calls)
	}
}

func TestCancelDuringRetryAdmissionEndsWithTheContextsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(200))
		// The retry waits a minute for a token; the context ends first.
		tr := New(s.mock(), WithLimit(Limit{Rate: rate.Every(time.Minute), Burst: 1}), WithRetry(RetryPolicy{MaxAttempts: 3}))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, testURL, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip = %v, %v; want nil and context.Canceled, not the kept 429", resp, err)
		}
		s.assertAllClosed(t)
	})
}

// TestDeadlineDuringAnAttemptClosesItsResponse: a call whose deadline
// passes while an attempt is out closes the response that attempt gets.
func TestDeadlineDuringAnAttemptClosesItsResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(2 * time.Second)
			return s.respond(r)
		})
		tr := New(base)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v", err)
		}
		s.assertAllClosed(t)
	})
}
