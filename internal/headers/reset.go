package headers

import (
	"math"
	"strings"
	"time"
)

// This file reads the forms a reset or a wait takes in a rate-limit
// header: seconds, a Unix time, milliseconds, a Go duration, an RFC 3339
// date-time, or an HTTP-date as Retry-After takes it.

// unixTimeThreshold separates a reset given as seconds from now from one
// given as a Unix time: no server asks for a 31-year wait, and every Unix
// time since 2001 is above it.
const unixTimeThreshold = 1_000_000_000

// parseReset reads a reset: delta seconds, or a Unix time in seconds when
// the number is at least unixTimeThreshold (either with decimals); a Go
// duration of one or more units ("6m0s", "1.5s", "12ms"); or an RFC 3339
// date-time, whose seconds may be left out ("2026-03-10T12:01Z"); or an
// HTTP-date as Retry-After takes it. Signs, exponents and overflows are
// not resets.
func parseReset(value string, now time.Time) (time.Duration, bool) {
	value = strings.TrimSpace(value)
	secs, nanos, ok := splitDecimal(value)
	switch {
	case !ok:
		if isDateTime(value) {
			return parseDateTime(value, now)
		}
		if d, ok := parseGoDuration(value); ok {
			return d, true
		}
		return parseHTTPDate(value, now)
	case secs < unixTimeThreshold:
		return time.Duration(secs)*time.Second + time.Duration(nanos), true
	case secs > math.MaxInt64/int64(time.Second):
		return 0, false // time.Unix would overflow and wrap into the past
	}
	return untilTime(time.Unix(secs, nanos), now)
}

// parseMillis reads non-negative decimal milliseconds ("1500", "20.5"), as
// Retry-After-Ms and X-Ms-Retry-After-Ms give them.
func parseMillis(value string) (time.Duration, bool) {
	ms, frac, ok := splitDecimal(strings.TrimSpace(value))
	// frac is in billionths of a millisecond: a thousandth of it is in
	// nanoseconds.
	if !ok || ms > (math.MaxInt64-frac/1e3)/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms)*time.Millisecond + time.Duration(frac/1e3), true
}

// goDurationUnits are the units of a Go duration, as time.ParseDuration
// knows them, in nanoseconds.
var goDurationUnits = [...]struct {
	name string
	ns   int64
}{
	{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3}, {"ms", 1e6},
	{"s", 1e9}, {"m", 60e9}, {"h", 3600e9},
}

// parseGoDuration reads a non-negative duration as Go's
// time.Duration.String writes it, "6m0s" or "1.5s": one or more decimal
// numbers, each with a unit. Unlike time.ParseDuration it takes no sign,
// and it allocates nothing when the value is malformed.
func parseGoDuration(value string) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	var total int64
	for value != "" {
		i := 0
		for i < len(value) && (value[i] >= '0' && value[i] <= '9' || value[i] == '.') {
			i++
		}
		j := i
		for j < len(value) && !(value[j] >= '0' && value[j] <= '9' || value[j] == '.') {
			j++
		}
		whole, frac, ok := splitDecimal(value[:i])
		if !ok {
			return 0, false
		}
		unit := int64(0)
		for _, u := range goDurationUnits {
			if u.name == value[i:j] {
				unit = u.ns
				break
			}
		}
		if unit == 0 || whole > math.MaxInt64/unit {
			return 0, false
		}
		// frac is in billionths; scaled by the unit it stays within int64
		// when divided first by a thousand, which every unit but ns is.
		fracNs := frac * unit / 1e9
		if unit%1000 == 0 {
			fracNs = frac * (unit / 1000) / 1e6
		}
		d := whole*unit + fracNs
		if d < 0 || total > math.MaxInt64-d {
			return 0, false
		}
		total += d
		value = value[j:]
	}
	return time.Duration(total), true
}

// isDateTime reports whether value has the shape of an RFC 3339 date-time,
// "2026-03-10T12:01", so that only such values reach time.Parse, which
// allocates its error.
func isDateTime(value string) bool {
	return len(value) >= len("2006-01-02T15:04Z") && value[4] == '-' && value[7] == '-' &&
		(value[10] == 'T' || value[10] == 't') && value[13] == ':'
}

// parseDateTime reads an RFC 3339 date-time as a wait from now, seconds
// and fractions optional.
func parseDateTime(value string, now time.Time) (time.Duration, bool) {
	layout := time.RFC3339 // takes fractional seconds too
	if value[16] != ':' {
		layout = "2006-01-02T15:04Z07:00"
	}
	t, err := time.Parse(layout, value)
	if err != nil {
		return 0, false
	}
	return untilTime(t, now)
}
