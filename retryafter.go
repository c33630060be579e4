package ratewise

import (
	"net/http"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
)

// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) as a
// wait from now: delta-seconds, an HTTP-date in any of RFC 9110's three
// forms, and, leniently, decimal seconds ("1.5") and "UTC" for "GMT". A
// date in the past is a wait of 0. It reports false for anything else:
// empty or malformed values, signs, exponents, NaN, and waits too long for
// a time.Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	return headers.ParseRetryAfter(value, now)
}

// WaitHint returns how long resp asks the client to wait before the next
// request: Retry-After-Ms, Retry-After ([ParseRetryAfter]), then the reset
// of a spent quota in the IETF RateLimit headers, X-RateLimit-*, OpenAI's
// and Anthropic's per-resource resets, and a minute for GitHub's secondary
// limits; the first valid one wins. A reset whose remaining count is above
// zero is skipped. It reports false when no header gives a valid wait. See
// "Wait hints" in the package doc for each form.
func WaitHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	return headers.WaitHint(resp, now)
}
