package headers

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) as a
// wait from now, leniently (see "Retry-After" in the package doc). It
// reports false for empty or malformed values, signs, exponents, NaN, and
// waits too long for a time.Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if c := value[0]; c >= '0' && c <= '9' || c == '.' {
		return parseSeconds(value)
	}
	return parseHTTPDate(value, now)
}

// parseHTTPDate reads an HTTP-date as a wait from now: IMF-fixdate, RFC
// 850 and asctime, and the RFC 1123 form with "UTC" for its zone that
// servers formatting a UTC time with time.RFC1123 send
// (sethvargo/go-limiter's httplimit among them). Other zone names are
// not read: Go would take them for UTC whatever their offset.
func parseHTTPDate(value string, now time.Time) (time.Duration, bool) {
	if t, err := time.Parse(http.TimeFormat, value); err == nil {
		return untilTime(t, now)
	}
	if strings.HasSuffix(value, " UTC") {
		if t, err := time.Parse(time.RFC1123, value); err == nil {
			return untilTime(t, now)
		}
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
// request, from the first header that gives a valid wait (see "Wait hints"
// in the package doc for the order and each form), and false when none
// does.
func WaitHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	if d, ok := RetryAfterHint(resp, now); ok {
		return d, true
	}
	if d, ok := resetHint(resp.Header, now); ok {
		return d, true
	}
	return githubSecondaryHint(resp)
}

// RetryAfterHint is the part of WaitHint a server gives of the answer
// itself, Retry-After and its millisecond forms (the first two of "Wait
// hints" in the package doc), leaving out the resets of a quota: what a
// failure that is no refusal (a transient 503) says of when to try again.
func RetryAfterHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil {
		return 0, false
	}
	h := resp.Header
	for _, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		for _, v := range h[name] {
			if d, ok := parseMillis(v); ok {
				return d, true
			}
		}
	}
	for _, v := range h["Retry-After"] {
		if d, ok := ParseRetryAfter(v, now); ok {
			return d, true
		}
	}
	return 0, false
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
