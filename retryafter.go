package ratewise

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) as a
// wait from now. It accepts delta-seconds ("120"), an HTTP-date in any of
// the three forms RFC 9110 allows (IMF-fixdate, RFC 850 and asctime), and,
// leniently, non-negative decimal seconds ("1.5"). A date in the past means
// a wait of 0. It reports false for anything else: empty or malformed
// values, signs, exponents, NaN, and waits too long for a time.Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' || c == '.' {
		return parseSeconds(value)
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return untilTime(t, now)
}

// WaitHint returns how long resp asks the client to wait before the next
// request, from the first of these headers that parses:
//
//   - Retry-After (see [ParseRetryAfter]);
//   - RateLimit-Reset, seconds until the quota resets;
//   - RateLimit, the IETF draft's structured header, its "reset" or "t"
//     parameter (of the exhausted policy, or the longest when several are);
//   - X-RateLimit-Reset, seconds until the reset or, when the number is
//     that large, the Unix time of the reset.
//
// It reports false when none is present and valid.
func WaitHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	h := resp.Header
	if v := h["Retry-After"]; len(v) > 0 {
		if d, ok := ParseRetryAfter(v[0], now); ok {
			return d, true
		}
	}
	if v := h["Ratelimit-Reset"]; len(v) > 0 {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	if v := h["Ratelimit"]; len(v) > 0 {
		if d, ok := parseRateLimitField(strings.Join(v, ","), now); ok {
			return d, true
		}
	}
	if v := h["X-Ratelimit-Reset"]; len(v) > 0 {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	return 0, false
}

// unixTimeThreshold separates a reset given as seconds from now from one
// given as a Unix time: no server asks for a 31-year wait, and every Unix
// time since 2001 is above it.
const unixTimeThreshold = 1_000_000_000

// parseReset reads a reset header: delta seconds, or a Unix time in
// seconds when the number is at least unixTimeThreshold.
func parseReset(value string, now time.Time) (time.Duration, bool) {
	secs, nanos, ok := splitDecimal(strings.TrimSpace(value))
	switch {
	case !ok:
		return 0, false
	case secs < unixTimeThreshold:
		return time.Duration(secs)*time.Second + time.Duration(nanos), true
	case secs > math.MaxInt64/int64(time.Second):
		return 0, false // time.Unix would overflow and wrap into the past
	}
	return untilTime(time.Unix(secs, nanos), now)
}

// parseSeconds reads non-negative decimal seconds ("30", "1.5") as a
// duration, rejecting anything that is not plain digits with at most one
// point, and values that overflow.
func parseSeconds(value string) (time.Duration, bool) {
	secs, frac, ok := splitDecimal(value)
	if !ok || secs > (math.MaxInt64-int64(frac))/int64(time.Second) {
		return 0, false
	}
	return time.Duration(secs)*time.Second + time.Duration(frac), true
}

// splitDecimal splits "123.456" into whole seconds and nanoseconds. It
// accepts digits with at most one point and at least one digit; digits
// past the ninth decimal are dropped. The seconds saturate at MaxInt64.
func splitDecimal(value string) (secs, nanos int64, ok bool) {
	whole, fraction, _ := strings.Cut(value, ".")
	if whole == "" && fraction == "" {
		return 0, 0, false
	}
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		if secs > (math.MaxInt64-int64(c-'0'))/10 {
			secs = math.MaxInt64 // saturate; callers reject it as overflow
			continue
		}
		secs = secs*10 + int64(c-'0')
	}
	scale := int64(time.Second)
	for i := 0; i < len(fraction); i++ {
		c := fraction[i]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		if scale > 1 {
			scale /= 10
			nanos += int64(c-'0') * scale
		}
	}
	return secs, nanos, true
}

// untilTime is the wait from now until t: 0 when t has passed, false when
// the wait does not fit a time.Duration.
func untilTime(t, now time.Time) (time.Duration, bool) {
	if !t.After(now) {
		return 0, true
	}
	d := t.Sub(now)
	if d == math.MaxInt64 { // Sub saturates instead of overflowing
		return 0, false
	}
	return d, true
}

// parseRateLimitField reads the IETF draft RateLimit header. It knows the
// structured list form of later drafts, `"default";r=0;t=30`, and the
// dictionary form of earlier ones, `limit=100, remaining=0, reset=30`.
// Among the members that carry a reset (t or reset), those whose remaining
// quota (r or remaining) is zero or absent are candidates; the longest of
// them is the wait, since every exhausted policy must reset first.
func parseRateLimitField(value string, now time.Time) (time.Duration, bool) {
	var (
		longest time.Duration
		found   bool
	)
	for member := range strings.SplitSeq(value, ",") {
		var (
			reset     time.Duration
			hasReset  bool
			remaining = "0"
		)
		for param := range strings.SplitSeq(member, ";") {
			key, val, ok := strings.Cut(param, "=")
			if !ok {
				continue
			}
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch strings.ToLower(strings.TrimSpace(key)) {
			case "t", "reset":
				reset, hasReset = parseReset(val, now)
			case "r", "remaining":
				remaining = val
			}
		}
		if !hasReset {
			continue
		}
		if left, frac, ok := splitDecimal(remaining); ok && (left != 0 || frac != 0) {
			continue // this policy still has quota: it is not why we wait
		}
		if !found || reset > longest {
			longest, found = reset, true
		}
	}
	return longest, found
}
