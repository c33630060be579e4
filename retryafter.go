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
// a wait of 0; an RFC 850 two-digit year more than 50 years ahead is read
// as the past year with the same last two digits, as RFC 9110 asks. It
// reports false for anything else: empty or malformed values, signs,
// exponents, NaN, and waits too long for a time.Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' || c == '.' {
		return parseSeconds(value)
	}
	if t, err := time.Parse(http.TimeFormat, value); err == nil {
		return untilTime(t, now)
	}
	if t, err := time.Parse(time.RFC850, value); err == nil {
		return untilTime(fixTwoDigitYear(t, now), now)
	}
	if t, err := time.Parse(time.ANSIC, value); err == nil {
		return untilTime(t, now)
	}
	return 0, false
}

// fixTwoDigitYear applies RFC 9110's rule to an RFC 850 date, whose year
// time.Parse placed in 1969..2068: the year is the one with the same last
// two digits that is at most 50 years after now's.
func fixTwoDigitYear(t, now time.Time) time.Time {
	year := now.Year() - now.Year()%100 + t.Year()%100
	if year > now.Year()+50 {
		year -= 100
	}
	return t.AddDate(year-t.Year(), 0, 0)
}

// WaitHint returns how long resp asks the client to wait before the next
// request, from the first of these headers that parses:
//
//   - Retry-After (see [ParseRetryAfter]), the first valid value when it
//     is repeated;
//   - RateLimit-Reset, unless RateLimit-Remaining says quota is left;
//   - RateLimit, the IETF draft's structured header: the "t" (or "reset")
//     parameter of the policy whose quota ("r" or "remaining") is spent,
//     the longest when several are;
//   - X-RateLimit-Reset, unless X-RateLimit-Remaining says quota is left.
//
// A reset is seconds from now or, when the number is that large (above
// 10^9), the Unix time of the reset. A reset is skipped when its remaining
// count is above zero: the refusal then came from some other limit, and
// waiting for that quota's reset would be waiting for the wrong thing. It
// reports false when no header gives a valid wait.
func WaitHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	h := resp.Header
	for _, v := range h["Retry-After"] {
		if d, ok := ParseRetryAfter(v, now); ok {
			return d, true
		}
	}
	if v := h["Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["Ratelimit-Remaining"]) {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	if v := h["Ratelimit"]; len(v) > 0 {
		if d, ok := parseRateLimitField(strings.Join(v, ","), now); ok {
			return d, true
		}
	}
	if v := h["X-Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["X-Ratelimit-Remaining"]) {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	return 0, false
}

// quotaSpent reports whether a remaining-quota header is absent, zero, or
// unreadable: anything but a count above zero.
func quotaSpent(remaining []string) bool {
	return len(remaining) == 0 || countSpent(remaining[0])
}

// countSpent reports whether a remaining count is zero or unreadable.
func countSpent(value string) bool {
	secs, frac, ok := splitDecimal(strings.TrimSpace(value))
	return !ok || secs == 0 && frac == 0
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
// structured list form of later drafts, `"burst";r=0;t=5, "day";r=9;t=60`,
// one item per policy, and the dictionary form of earlier ones,
// `limit=100, remaining=0, reset=30`, one key per member. A policy whose
// quota is spent (r or remaining zero, or absent) is a candidate; the
// longest reset among them is the wait, since every spent policy must
// reset before a request can pass.
func parseRateLimitField(value string, now time.Time) (time.Duration, bool) {
	var (
		longest time.Duration
		found   bool
	)
	eachRateLimitPolicy(value, now, func(p rateLimitPolicy) {
		spent := !p.hasRemaining || countSpent(p.remaining)
		if p.hasReset && spent && (!found || p.reset > longest) {
			longest, found = p.reset, true
		}
	})
	return longest, found
}

// eachRateLimitPolicy calls fn with each policy of an IETF draft RateLimit
// value, in either form: each item of the structured list, then the
// members of the dictionary form gathered into one unnamed policy. It
// cuts rather than splits, so that reading a header allocates nothing.
func eachRateLimitPolicy(value string, now time.Time, fn func(rateLimitPolicy)) {
	var dict rateLimitPolicy
	for value != "" {
		var member string
		member, value, _ = strings.Cut(value, ",")
		name, params, isItem := strings.Cut(member, ";")
		if !isItem {
			dict.set(member, now)
			continue
		}
		item := rateLimitPolicy{name: strings.TrimSpace(name)}
		for params != "" {
			var param string
			param, params, _ = strings.Cut(params, ";")
			item.set(param, now)
		}
		fn(item)
	}
	fn(dict)
}

// rateLimitPolicy is what the RateLimit header says of one policy.
type rateLimitPolicy struct {
	name         string // the list item's name; "" in the dictionary form
	reset        time.Duration
	hasReset     bool
	remaining    string
	hasRemaining bool
}

// set reads one key=value parameter; other parameters are ignored.
func (p *rateLimitPolicy) set(param string, now time.Time) {
	key, val, ok := strings.Cut(param, "=")
	if !ok {
		return
	}
	val = strings.Trim(strings.TrimSpace(val), `"`)
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "t", "reset":
		p.reset, p.hasReset = parseReset(val, now)
	case "r", "remaining":
		p.remaining, p.hasRemaining = val, true
	}
}
