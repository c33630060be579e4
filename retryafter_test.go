package ratewise

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

var refNow = time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{
		"0", "30", "1.5", ".5", "99999999999", "9223372036", "-1", "+1", "NaN", "1e9",
		"Tue, 10 Mar 2026 12:00:30 GMT", "Tuesday, 10-Mar-26 12:01:00 GMT", "Tue Mar 10 12:00:05 2026",
		"Fri, 31 Dec 9999 23:59:59 GMT", "", " ", "\t7\t", "1.", "0.000000000001",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := ParseRetryAfter(value, refNow)
		if !ok {
			if d != 0 {
				t.Fatalf("ParseRetryAfter(%q) = %v, false; a rejected value must give 0", value, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, want a non-negative wait", value, d)
		}
		// Plain integers must come back exactly.
		if n, err := strconv.ParseUint(value, 10, 64); err == nil && n <= math.MaxInt64/uint64(time.Second) {
			if d != time.Duration(n)*time.Second {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %ds", value, d, n)
			}
		}
		// An accepted date is in the future by exactly d, or in the past.
		if when, err := http.ParseTime(value); err == nil && when.After(refNow) && when.Sub(refNow) != d {
			t.Fatalf("ParseRetryAfter(%q) = %v, want %v", value, d, when.Sub(refNow))
		}
	})
}

// TestGitHubPrimaryLimitRetriedAtItsReset: a 403 over GitHub's primary
// limit, Final before, is retried at the reset it names, and a secondary
// limit that names nothing (caught by its phrase) a minute later.
func TestGitHubPrimaryLimitRetriedAtItsReset(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 3, InitialDelay: time.Second, Jitter: JitterNone,
		TotalWaitCap: 5 * time.Minute, RateLimitPhrases: []string{"secondary rate limit"}}
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts in 2000, before any Unix time a
		// reset is read as: move it to the present.
		time.Sleep(time.Until(refNow))
		start := time.Now()
		reset := strconv.FormatInt(start.Add(90*time.Second).Unix(), 10)
		secondary := answer(403, "X-RateLimit-Remaining", "4999", "X-GitHub-Request-Id", "CE2C:2D7E")
		secondary.body = `{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`
		s := newScript(answer(403, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", reset),
			secondary, answer(200))
		r := s.get(t, context.Background(), policy)
		got := s.offsets(start)
		if r.status != 200 || len(got) != 3 || got[1] != 90*time.Second || got[2] != 150*time.Second {
			t.Errorf("got %d, requests at %v; want a 200, the retries at 1m30s (the reset) and 2m30s (a minute on)", r.status, got)
		}
		s.assertAllClosed(t)
	})
}
