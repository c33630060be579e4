package ratewise

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// transientStatuses are the answers every retrying peer retries.
var transientStatuses = []int{408, 500, 502, 503, 504}

func TestTransientServerErrorsAreRetried(t *testing.T) {
	for _, method := range []string{"GET", "HEAD", "PUT", "DELETE", "OPTIONS"} {
		for _, status := range transientStatuses {
			t.Run(method+" "+http.StatusText(status), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := newScript(answer(status), answer(200))
					ctx, stats := WithCallStats(context.Background())
					resp, err := New(s.mock()).RoundTrip(mustRequest(t, method, nil).WithContext(ctx))
					if err != nil {
						t.Fatalf("RoundTrip: %v", err)
					}
					readAll(t, resp)
					if resp.StatusCode != 200 || s.calls() != 2 || stats.Attempts() != 2 {
						t.Errorf("status %d after %d calls (%d attempts), want 200 after 2", resp.StatusCode, s.calls(), stats.Attempts())
					}
				})
			})
		}
	}
}

func TestTransientErrorsOfUnrepeatableRequestsAreNotRetried(t *testing.T) {
	for _, c := range []struct {
		method, key string
		wantCalls   int
	}{
		{"POST", "", 1},
		{"PATCH", "", 1},
		{"POST", "Idempotency-Key", 2},
		{"PATCH", "X-Idempotency-Key", 2},
	} {
		for _, status := range transientStatuses {
			t.Run(c.method+" "+c.key+" "+http.StatusText(status), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := newScript(answer(status), answer(200))
					req := mustRequest(t, c.method, strings.NewReader("order #1"))
					if c.key != "" {
						req.Header.Set(c.key, "order-1")
					}
					resp, err := New(s.mock()).RoundTrip(req)
					if err != nil {
						t.Fatalf("RoundTrip: %v", err)
					}
					readAll(t, resp)
					if s.calls() != c.wantCalls {
						t.Errorf("%d calls, want %d", s.calls(), c.wantCalls)
					}
					if c.wantCalls == 1 && resp.StatusCode != status {
						t.Errorf("status %d, want the server's %d handed back", resp.StatusCode, status)
					}
				})
			})
		}
	}
}

// A base that leaves resp.Request nil (a fake, a custom RoundTripper)
// still gets its GET's 503 retried: the transport knows the request.
func TestTransientErrorIsRetriedWhenTheBaseSetsNoRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		calls := 0
		base := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			status := 503
			if calls > 1 {
				status = 200
			}
			return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody}, nil
		})
		resp, err := New(base).RoundTrip(mustRequest(t, "GET", nil))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || calls != 2 {
			t.Errorf("status %d after %d calls, want 200 after 2", resp.StatusCode, calls)
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestFinalServerErrorsRetriesNoBareServerError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503), answer(200))
		if r := s.get(t, context.Background(), RetryPolicy{Classify: FinalServerErrors}); r.status != 503 || s.calls() != 1 {
			t.Errorf("status %d after %d calls, want 503 after 1", r.status, s.calls())
		}
		s = newScript(answer(429, "Retry-After", "2"), answer(200))
		if r := s.get(t, context.Background(), RetryPolicy{Classify: FinalServerErrors}); r.status != 200 || s.calls() != 2 {
			t.Errorf("a 429: status %d after %d calls, want 200 after 2", r.status, s.calls())
		}
	})
}

// A transient error waits the full-jitter backoff, raised to the
// server's hint when it gives one.
func TestTransientErrorWaitsItsBackoffOrTheHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := RetryPolicy{InitialDelay: time.Second, MaxDelay: time.Second}
		s := newScript(answer(502), answer(502), answer(502), answer(200))
		start := time.Now()
		r := s.get(t, context.Background(), p)
		times := s.offsets(start)
		if r.status != 200 || len(times) != 4 {
			t.Fatalf("status %d after %d calls, want 200 after 4", r.status, len(times))
		}
		for i := 1; i < len(times); i++ {
			if gap := times[i] - times[i-1]; gap > time.Second {
				t.Errorf("retry %d waited %v, want at most the 1s of a full-jitter backoff", i, gap)
			}
		}

		if gap := retryGap(t, p, answer(500, "Retry-After", "7")); gap < 7*time.Second || gap > 8*time.Second {
			t.Errorf("a 500 with Retry-After: 7 was retried after %v, want 7s (plus the pause's spread)", gap)
		}
	})
}

// retryGap sends a GET under p to a server that answers first, then 200,
// and returns how long after the first request the retry went.
func retryGap(t *testing.T, p RetryPolicy, first step) time.Duration {
	t.Helper()
	s := newScript(first, answer(200))
	start := time.Now()
	if r := s.get(t, context.Background(), p); r.status != 200 || s.calls() != 2 {
		t.Fatalf("status %d after %d calls, want 200 after 2", r.status, s.calls())
	}
	return s.offsets(start)[1]
}

// A transient error's wait is what the server says of the error: a
// spent quota's reset beside it (a limiter in front of the application
// counts every answer) is no hint to wait for. The retry goes after its
// backoff and its turn of the quota the answer counted (10 per 30s, a
// turn in 3s), not at the reset; a Retry-After beside the same reset is
// waited out. A key nothing paces (WithoutLearning) waits for the reset.
func TestTransientErrorWaitsNoQuotaReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := RetryPolicy{InitialDelay: time.Second, MaxDelay: time.Second}
		spent := []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"}
		if gap := retryGap(t, p, answer(503, spent...)); gap > 4*time.Second {
			t.Errorf("a 503 with a spent quota of 10 resetting in 30s was retried after %v, want its backoff and a turn of the quota, at most 4s", gap)
		}

		if gap := retryGap(t, p, answer(503, append(spent, "Retry-After", "5")...)); gap < 5*time.Second || gap > 6*time.Second {
			t.Errorf("a 503 with Retry-After: 5 and a quota resetting in 30s was retried after %v, want 5s", gap)
		}

		// With no pace to keep the quota, the reset holds the retry.
		s := newScript(answer(503, spent...), answer(200))
		start := time.Now()
		resp, err := New(s.mock(), WithRetry(p), WithoutLearning()).RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil || resp.StatusCode != 200 || s.calls() != 2 {
			t.Fatalf("WithoutLearning: %v, %v after %d calls; want 200 after 2", resp, err, s.calls())
		}
		_ = readAll(t, resp)
		if gap := s.offsets(start)[1]; gap < 30*time.Second {
			t.Errorf("WithoutLearning, a 503 with a spent quota resetting in 30s was retried after %v, want the reset", gap)
		}
	})
}

// Bad input, each classified as DefaultClassify documents.
func TestServerErrorWithGarbageRetryAfterIsRetriedAfterBackoff(t *testing.T) {
	for _, c := range []struct {
		status int
		want   Class
	}{
		{503, RateLimited}, // a 503 carrying Retry-After is a refusal for rate, readable or not
		{500, Retryable},
		{504, Retryable},
	} {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := RetryPolicy{InitialDelay: time.Second, MaxDelay: time.Second}
				if gap := retryGap(t, p, answer(c.status, "Retry-After", "soon")); gap > time.Second {
					t.Errorf("retried after %v, want the backoff's at most 1s: an unreadable hint asks for nothing", gap)
				}
				resp := &http.Response{StatusCode: c.status, Header: http.Header{"Retry-After": {"soon"}}, Request: mustRequest(t, "GET", nil)}
				if got := DefaultClassify(resp); got != c.want {
					t.Errorf("DefaultClassify = %v, want %v", got, c.want)
				}
			})
		})
	}
}

func TestServiceUnavailableSayingRateLimitInItsBody(t *testing.T) {
	newResp := func() *http.Response {
		return &http.Response{StatusCode: 503, Header: http.Header{},
			Body: http.NoBody, Request: mustRequest(t, "GET", nil)}
	}
	resp := newResp()
	resp.Body = readCloser("API rate limit exceeded for this token")
	if got := (&RetryPolicy{}).classify(resp, resp.Request); got != Retryable {
		t.Errorf("with no phrases: %v, want retryable (a transient 503)", got)
	}
	resp = newResp()
	resp.Body = readCloser("API rate limit exceeded for this token")
	p := RetryPolicy{RateLimitPhrases: []string{"rate limit"}}
	if got := p.classify(resp, resp.Request); got != RateLimited {
		t.Errorf("with the phrase \"rate limit\": %v, want rate-limited", got)
	}
	resp = newResp()
	resp.Request = mustRequest(t, "POST", nil)
	resp.Body = readCloser("API rate limit exceeded for this token")
	if got := p.classify(resp, resp.Request); got != RateLimited {
		t.Errorf("a POST's, with the phrase: %v, want rate-limited (a refusal is retried whatever the method)", got)
	}
}

func TestAntiBotPageWithStatus200(t *testing.T) {
	page := "<html>Sign in to confirm you’re not a bot</html>"
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: readCloser(page), Request: mustRequest(t, "GET", nil)}
	if got := (&RetryPolicy{}).classify(resp, resp.Request); got != Final {
		t.Errorf("with no BlockPhrases: %v, want final (a 200 is a 200)", got)
	}
	resp.Body = readCloser(page)
	p := RetryPolicy{BlockPhrases: []string{"confirm you're not a bot"}}
	if got := p.classify(resp, resp.Request); got != Blocked {
		t.Errorf("with the phrase: %v, want blocked", got)
	}
}

// A server that answers 503 to everything: the retries the calls add stay
// within the retry budget (a fifth of the calls, plus the floor for the
// time they took, plus the balance a host starts with), and every call
// ends within its wait cap.
func TestDownServerGetsNoMoreRetriesThanTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls, workers = 2000, 200
		s := newScript(answer(503))
		tr := New(s.mock())
		policy := tr.retry.Load()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		longest := time.Duration(0)
		next := 0
		for range workers {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= calls {
						return
					}
					began := time.Now()
					resp, err := tr.RoundTrip(mustRequest(t, "GET", nil))
					if err != nil {
						t.Errorf("RoundTrip: %v", err)
						return
					}
					readAll(t, resp)
					mu.Lock()
					longest = max(longest, time.Since(began))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		retries := float64(s.calls() - calls)
		budget := policy.RetryBudget*calls + policy.RetryBudgetFloor*elapsed.Seconds() + retryBudgetCap(policy.RetryBudget, policy.RetryBudgetFloor)
		t.Logf("%d calls: %d requests (%.0f retries, budget %.0f) in %v; longest call %v",
			calls, s.calls(), retries, budget, elapsed, longest)
		if retries > budget {
			t.Errorf("%.0f retries, want at most the budget's %.0f", retries, budget)
		}
		if unbudgeted := float64(calls * (policy.MaxAttempts - 1)); retries > unbudgeted/2 {
			t.Errorf("%.0f retries of the %.0f the attempts allow: the budget did not bind", retries, unbudgeted)
		}
		if longest > policy.TotalWaitCap {
			t.Errorf("a call took %v, past its wait cap of %v", longest, policy.TotalWaitCap)
		}
	})
}

func readCloser(s string) *countedReadCloser { return &countedReadCloser{strings.NewReader(s)} }

type countedReadCloser struct{ *strings.Reader }

func (countedReadCloser) Close() error { return nil }
