package ratewisetest

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 250_000_000, time.FixedZone("CET", 3600))
	tests := []struct {
		mode RetryAfterMode
		give time.Duration
		want string
	}{
		{mode: RetryAfterSeconds, give: time.Nanosecond, want: "1"},
		{mode: RetryAfterSeconds, give: 999 * time.Millisecond, want: "1"},
		{mode: RetryAfterSeconds, give: 1001 * time.Millisecond, want: "2"},
		{mode: RetryAfterSeconds, give: 0, want: "1"},
		// 12:00:00.25 CET + 0.75s is exactly 11:00:01 UTC.
		{mode: RetryAfterHTTPDate, give: 750 * time.Millisecond, want: "Sat, 01 Mar 2025 11:00:01 GMT"},
		{mode: RetryAfterHTTPDate, give: 800 * time.Millisecond, want: "Sat, 01 Mar 2025 11:00:02 GMT"},
		{mode: RetryAfterNone, give: time.Second, want: ""},
		// The window, whatever the wait.
		{mode: RetryAfterWindow, give: time.Second, want: "60"},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.mode, now, tt.give, time.Minute); got != tt.want {
			t.Errorf("retryAfter(%v, now, %v, 1m) = %q, want %q", tt.mode, tt.give, got, tt.want)
		}
	}
}

func TestBucketState(t *testing.T) {
	tests := []struct {
		tokens, rate float64
		burst        int
		want         verdict
	}{
		{tokens: 5, rate: 1, burst: 5, want: verdict{remaining: 5}},
		{tokens: 4, rate: 0.5, burst: 5, want: verdict{remaining: 4, reset: 2 * time.Second}},
		{tokens: 0, rate: 2, burst: 3, want: verdict{untilOne: 500 * time.Millisecond, reset: 1500 * time.Millisecond}},
		{tokens: 0.75, rate: 1, burst: 1, want: verdict{untilOne: 250 * time.Millisecond, reset: 250 * time.Millisecond}},
		{tokens: -1, rate: 1, burst: 1, want: verdict{untilOne: time.Second, reset: time.Second}},
	}
	for _, tt := range tests {
		if got := bucketState(tt.tokens, tt.rate, tt.burst); got != tt.want {
			t.Errorf("bucketState(%v, %v, %d) = %+v, want %+v", tt.tokens, tt.rate, tt.burst, got, tt.want)
		}
	}
}
