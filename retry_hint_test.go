package ratewise

import (
	"context"
	"math"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests how the retries honour a server's wait hints: Retry-
// After, rate-limit reset headers, and backoffs beside them.

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

func TestIgnoreRetryAfterUsesBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "60"), answer(200))
		p := RetryPolicy{IgnoreRetryAfter: true, InitialDelay: 2 * time.Second, Jitter: JitterNone}
		if r := s.get(t, context.Background(), p); r.elapsed != 2*time.Second {
			t.Errorf("elapsed = %v, want the 2s backoff", r.elapsed)
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
