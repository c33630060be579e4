package ratewise_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
)

// This file fuzzes WaitHint: every header a server may send, in every
// form and combination, reads as the wait it says, or as none.

// fuzzNow is the fixed "now" of the fuzz targets, so that a failing input
// fails again.
var fuzzNow = time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)

// waitHintInput is one FuzzWaitHint input: the value of each header, ""
// for absent (every reader takes an empty value as no value).
type waitHintInput struct {
	retryAfter1, retryAfter2 string
	reset, remaining         string // RateLimit-Reset, RateLimit-Remaining
	rateLimit, policy        string // RateLimit, RateLimit-Policy
	xReset, xRemaining       string // X-RateLimit-Reset, X-RateLimit-Remaining
}

func (in waitHintInput) header() http.Header {
	h := http.Header{}
	add := func(name, value string) {
		if value != "" {
			h.Add(name, value)
		}
	}
	add("Retry-After", in.retryAfter1)
	add("Retry-After", in.retryAfter2)
	add("RateLimit-Reset", in.reset)
	add("RateLimit-Remaining", in.remaining)
	add("RateLimit", in.rateLimit)
	add("RateLimit-Policy", in.policy)
	add("X-RateLimit-Reset", in.xReset)
	add("X-RateLimit-Remaining", in.xRemaining)
	return h
}

func (in waitHintInput) hint() (time.Duration, bool) {
	return ratewise.WaitHint(&http.Response{StatusCode: http.StatusTooManyRequests, Header: in.header()}, fuzzNow)
}

// plainDigits reports whether s is only ASCII digits, at least one.
func plainDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// quotaLeft reports whether a remaining count surely says quota is left:
// a whole number above zero.
func quotaLeft(s string) bool {
	s = strings.TrimSpace(s)
	return plainDigits(s) && strings.Trim(s, "0") != ""
}

// appendItem adds a policy to a RateLimit field.
func appendItem(field, item string) string {
	if field == "" {
		return item
	}
	return field + ", " + item
}

func FuzzWaitHint(f *testing.F) {
	type seed = waitHintInput
	for _, s := range []seed{
		{},
		{retryAfter1: "120"},
		{retryAfter1: "7", retryAfter2: "70", xReset: "60"},
		{retryAfter1: "soon", retryAfter2: "8"},
		{retryAfter1: "99999999999", reset: "5"},
		{retryAfter1: "Fri, 31 Dec 9999 23:59:59 GMT", reset: "12", remaining: "0"},
		{retryAfter1: "-1", retryAfter2: "1.5"},
		{reset: "12", remaining: "5"},
		{reset: "1773144060", remaining: "0"},
		{reset: "-5", remaining: "-1", rateLimit: `"burst";r=0;t=5`},
		{rateLimit: `"burst";r=0;t=5, "day";r=0;t=3600, "hour";r=40;t=9000`, policy: `"burst";q=10;w=1, "day";q=1000;w=86400`},
		{rateLimit: "limit=100, remaining=0, reset=30", policy: "100;w=60"},
		{rateLimit: "limit=100, remaining=50, reset=30, remaining=0"},
		{rateLimit: ";;==,,", xReset: "45"},
		{rateLimit: `"a";r=0;t=99999999999`, xReset: "9223372036854775807", xRemaining: "0"},
		{xReset: "1773144090.5", xRemaining: "0.0000000001"},
		{xReset: "99999999999999999999", xRemaining: "4000"},
		{retryAfter1: "\x00", reset: "1\n", remaining: "0\r", rateLimit: "\"\x7f\";r=0;t=1e3", xReset: " 3 "},
	} {
		f.Add(s.retryAfter1, s.retryAfter2, s.reset, s.remaining, s.rateLimit, s.policy, s.xReset, s.xRemaining)
	}
	f.Fuzz(func(t *testing.T, retryAfter1, retryAfter2, reset, remaining, rateLimit, policy, xReset, xRemaining string) {
		in := waitHintInput{retryAfter1, retryAfter2, reset, remaining, rateLimit, policy, xReset, xRemaining}
		d, ok := in.hint()
		if d < 0 || !ok && d != 0 {
			t.Fatalf("WaitHint(%+v) = %v, %v; want a wait of at least 0, and 0 with false", in, d, ok)
		}
		if in == (waitHintInput{}) && ok {
			t.Fatalf("WaitHint of no header = %v, true", d)
		}

		// Retry-After wins over every other header: its first valid value.
		if plainDigits(retryAfter1) {
			if n, err := strconv.Atoi(retryAfter1); err == nil && n < 1e9 && (!ok || d != time.Duration(n)*time.Second) {
				t.Fatalf("WaitHint(%+v) = %v, %v; want the Retry-After, %ds", in, d, ok, n)
			}
		}
		for _, v := range []string{retryAfter1, retryAfter2} {
			if want, valid := ratewise.ParseRetryAfter(v, fuzzNow); valid {
				if !ok || d != want {
					t.Fatalf("WaitHint(%+v) = %v, %v; want the Retry-After %q, %v", in, d, ok, v, want)
				}
				return
			}
		}

		// RateLimit-Policy says what a quota is, not when it comes back.
		if policy != "" {
			noPolicy := in
			noPolicy.policy = ""
			if d2, ok2 := noPolicy.hint(); d2 != d || ok2 != ok {
				t.Fatalf("RateLimit-Policy %q changed WaitHint from %v, %v to %v, %v", policy, d2, ok2, d, ok)
			}
		}
		// A reset whose remaining count is above zero is skipped.
		if quotaLeft(remaining) {
			without := in
			without.reset, without.remaining = "", ""
			if d2, ok2 := without.hint(); d2 != d || ok2 != ok {
				t.Fatalf("RateLimit-Reset with RateLimit-Remaining %q used: %v, %v; without them %v, %v", remaining, d, ok, d2, ok2)
			}
		}
		if quotaLeft(xRemaining) {
			without := in
			without.xReset, without.xRemaining = "", ""
			if d2, ok2 := without.hint(); d2 != d || ok2 != ok {
				t.Fatalf("X-RateLimit-Reset with X-RateLimit-Remaining %q used: %v, %v; without them %v, %v", xRemaining, d, ok, d2, ok2)
			}
		}
		// A RateLimit policy with quota left never gives the wait.
		withLeft := in
		withLeft.rateLimit = appendItem(rateLimit, `"fuzz";r=5;t=77`)
		if d2, ok2 := withLeft.hint(); d2 != d || ok2 != ok {
			t.Fatalf("a RateLimit policy with quota left changed WaitHint(%+v) from %v, %v to %v, %v", in, d, ok, d2, ok2)
		}
		// A spent RateLimit policy that resets now: the longest reset of
		// the RateLimit field stands, and X-RateLimit-* no longer counts.
		withSpent := in
		withSpent.rateLimit = appendItem(rateLimit, `"fuzz";r=0;t=0`)
		noX := in
		noX.xReset, noX.xRemaining = "", ""
		want, wantOK := noX.hint()
		if !wantOK {
			want, wantOK = 0, true
		}
		if d2, ok2 := withSpent.hint(); d2 != want || ok2 != wantOK {
			t.Fatalf("a spent RateLimit policy of reset 0 made WaitHint(%+v) %v, %v; want %v, %v", in, d2, ok2, want, wantOK)
		}

		// A reset alone is seconds from now, or a Unix time above 10^9.
		if in == (waitHintInput{retryAfter1: retryAfter1, retryAfter2: retryAfter2, reset: reset}) {
			s := strings.TrimSpace(reset)
			n, err := strconv.ParseInt(s, 10, 64)
			switch {
			case !plainDigits(s) || err != nil:
			case n < 1e9:
				if !ok || d != time.Duration(n)*time.Second {
					t.Fatalf("RateLimit-Reset %q = %v, %v; want %ds", reset, d, ok, n)
				}
			case n <= math.MaxInt64/int64(time.Second):
				want := max(time.Unix(n, 0).Sub(fuzzNow), 0)
				if !ok || d != want {
					t.Fatalf("RateLimit-Reset %q = %v, %v; want the Unix time, %v from now", reset, d, ok, want)
				}
			default:
				if ok {
					t.Fatalf("RateLimit-Reset %q = %v, true; want false: no Duration holds it", reset, d)
				}
			}
		}
	})
}

// familyInput is one FuzzWaitHintFamilies input: the headers WaitHint
// reads besides those of FuzzWaitHint, "" for absent.
type familyInput struct {
	retryAfterMs, xMsRetryAfterMs, retryAfter string
	resetAfter, xRemaining                    string // Discord
	tokensRemaining, tokensReset              string // OpenAI
	anthropicRemaining, anthropicReset        string
	beta                                      string // Atlassian
	status                                    int
	github                                    bool // X-GitHub-Request-Id
}

func (in familyInput) hint() (time.Duration, bool) {
	h := http.Header{}
	for _, kv := range [][2]string{
		{"retry-after-ms", in.retryAfterMs}, {"x-ms-retry-after-ms", in.xMsRetryAfterMs}, {"Retry-After", in.retryAfter},
		{"X-RateLimit-Reset-After", in.resetAfter}, {"X-RateLimit-Remaining", in.xRemaining},
		{"x-ratelimit-remaining-tokens", in.tokensRemaining}, {"x-ratelimit-reset-tokens", in.tokensReset},
		{"anthropic-ratelimit-tokens-remaining", in.anthropicRemaining}, {"anthropic-ratelimit-tokens-reset", in.anthropicReset},
		{"Beta-RateLimit", in.beta},
	} {
		if kv[1] != "" {
			h.Set(kv[0], kv[1])
		}
	}
	if in.github {
		h.Set("X-GitHub-Request-Id", "CE2C:2D7E")
	}
	return ratewise.WaitHint(&http.Response{StatusCode: in.status, Header: h}, fuzzNow)
}

// plainMillis reads the milliseconds of a plain count of at most twelve
// digits, as the oracle of Retry-After-Ms.
func plainMillis(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if !plainDigits(s) || len(s) > 12 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return time.Duration(n) * time.Millisecond, err == nil
}

func FuzzWaitHintFamilies(f *testing.F) {
	type seed = familyInput
	for _, s := range []seed{
		{status: 429},
		{retryAfterMs: "1500", retryAfter: "2", status: 429},
		{xMsRetryAfterMs: "1234", status: 429},
		{retryAfterMs: "-1", xMsRetryAfterMs: "1e3", retryAfter: "7", status: 429},
		{resetAfter: "64.57", xRemaining: "0", status: 429},
		{resetAfter: "64.57", xRemaining: "9", retryAfter: "1337", status: 429},
		{tokensRemaining: "0", tokensReset: "6m0s", anthropicRemaining: "0", anthropicReset: "2026-03-10T12:00:30Z", status: 429},
		{tokensRemaining: "149984", tokensReset: "6m0s", status: 429},
		{beta: `"tenant-app-quota";r=0;t=2788`, status: 429},
		{status: 403, github: true},
		{status: 200, github: true},
		{retryAfterMs: "99999999999999999999", tokensReset: "2562047h47m16.854775808s", anthropicReset: "9999-12-31T23:59:59Z", status: 429},
	} {
		f.Add(s.retryAfterMs, s.xMsRetryAfterMs, s.retryAfter, s.resetAfter, s.xRemaining, s.tokensRemaining, s.tokensReset,
			s.anthropicRemaining, s.anthropicReset, s.beta, s.status, s.github)
	}
	f.Fuzz(func(t *testing.T, retryAfterMs, xMsRetryAfterMs, retryAfter, resetAfter, xRemaining, tokensRemaining, tokensReset,
		anthropicRemaining, anthropicReset, beta string, status int, github bool) {
		in := familyInput{retryAfterMs, xMsRetryAfterMs, retryAfter, resetAfter, xRemaining, tokensRemaining, tokensReset,
			anthropicRemaining, anthropicReset, beta, status, github}
		d, ok := in.hint()
		if d < 0 || !ok && d != 0 {
			t.Fatalf("WaitHint(%+v) = %v, %v; want a wait of at least 0, and 0 with false", in, d, ok)
		}
		// The milliseconds come first, then Retry-After.
		for _, v := range []string{retryAfterMs, xMsRetryAfterMs} {
			if want, valid := plainMillis(v); valid {
				if !ok || d != want {
					t.Fatalf("WaitHint(%+v) = %v, %v; want the milliseconds %q, %v", in, d, ok, v, want)
				}
				return
			}
		}
		noMillis := strings.TrimSpace(retryAfterMs) == "" && strings.TrimSpace(xMsRetryAfterMs) == ""
		if want, valid := ratewise.ParseRetryAfter(retryAfter, fuzzNow); valid && noMillis {
			if !ok || d != want {
				t.Fatalf("WaitHint(%+v) = %v, %v; want the Retry-After %q, %v", in, d, ok, retryAfter, want)
			}
			return
		}
		// A family with quota left never gives the wait.
		for _, f := range []struct {
			remaining string
			without   func(familyInput) familyInput
		}{
			{xRemaining, func(in familyInput) familyInput { in.resetAfter, in.xRemaining = "", ""; return in }},
			{tokensRemaining, func(in familyInput) familyInput { in.tokensReset, in.tokensRemaining = "", ""; return in }},
			{anthropicRemaining, func(in familyInput) familyInput { in.anthropicReset, in.anthropicRemaining = "", ""; return in }},
		} {
			if quotaLeft(f.remaining) {
				if d2, ok2 := f.without(in).hint(); d2 != d || ok2 != ok {
					t.Fatalf("a reset with %q left changed WaitHint(%+v) from %v, %v to %v, %v", f.remaining, in, d2, ok2, d, ok)
				}
			}
		}
		// GitHub's minute: only for its own 403s and 429s, and only when
		// nothing else gives a wait.
		bare := familyInput{status: status, github: github}
		bd, bok := bare.hint()
		if wantMinute := github && (status == 403 || status == 429); bok != wantMinute || bok && bd != time.Minute {
			t.Fatalf("WaitHint(status %d, GitHub %v, no other header) = %v, %v", status, github, bd, bok)
		}
		if !ok && bok {
			t.Fatalf("WaitHint(%+v) = no hint, but the bare answer has GitHub's minute", in)
		}
	})
}
