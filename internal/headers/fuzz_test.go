package headers

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseReset holds parseReset to its oracles: time.ParseDuration for
// Go durations, time.Parse for RFC 3339 date-times, and whole seconds for
// plain numbers; whatever it reads is a wait of at least 0.
func FuzzParseReset(f *testing.F) {
	for _, seed := range []string{
		"30", "64.57", "1773144060", "1773144060.5", "6m0s", "1h2m3.5s", "12ms", "7µs", "0s", ".5s", "1.s",
		"2026-03-10T12:01:00Z", "2026-03-10T12:00:00.25Z", "2026-03-10T13:01:00+01:00", "2026-03-10T12:01Z",
		"", "-1s", "+1s", "1e3", "5d", "2562047h47m16.854775808s", "9999-12-31T23:59:59Z", "2026-13-10T12:01:00Z",
	} {
		f.Add(seed)
	}
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		d, ok := parseReset(value, now)
		if d < 0 || !ok && d != 0 {
			t.Fatalf("parseReset(%q) = %v, %v; want a wait of at least 0, and 0 with false", value, d, ok)
		}
		v := strings.TrimSpace(value)
		if v == "" || v[0] == '-' || v[0] == '+' {
			if ok {
				t.Fatalf("parseReset(%q) = %v, true; want no reset", value, d)
			}
			return
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n < unixTimeThreshold {
			if !ok || d != time.Duration(n)*time.Second {
				t.Fatalf("parseReset(%q) = %v, %v; want %ds", value, d, ok, n)
			}
			return
		}
		if isDateTime(v) {
			if when, err := time.Parse(time.RFC3339, v); err == nil {
				want, wantOK := untilTime(when, now)
				if d != want || ok != wantOK {
					t.Fatalf("parseReset(%q) = %v, %v; want %v, %v", value, d, ok, want, wantOK)
				}
			}
			return
		}
		if strings.Trim(v, "0123456789.") == "" {
			return // decimal seconds or a Unix time, held by FuzzWaitHint
		}
		want, err := time.ParseDuration(v)
		if err != nil {
			if ok {
				t.Fatalf("parseReset(%q) = %v, true; time.ParseDuration says %v", value, d, err)
			}
			return
		}
		// time.ParseDuration rounds long fractions through a float64: allow
		// the few nanoseconds that makes.
		if diff := d - want; !ok || diff < -4*time.Microsecond || diff > 4*time.Microsecond {
			t.Fatalf("parseReset(%q) = %v, %v; time.ParseDuration says %v", value, d, ok, want)
		}
	})
}
