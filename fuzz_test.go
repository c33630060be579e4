package ratewise_test

import (
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
)

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

// The variables PolicyFromEnv and LimitFromEnv read, under the prefix FZ.
var (
	policyVars = []string{"FZ_RETRY_MAX_ATTEMPTS", "FZ_RETRY_INITIAL_DELAY", "FZ_RETRY_MAX_DELAY",
		"FZ_RETRY_TOTAL_CAP", "FZ_RETRY_MULTIPLIER", "FZ_RETRY_JITTER"}
	limitVars = []string{"FZ_MIN_DELAY", "FZ_RATE", "FZ_BURST", "FZ_MAX_CONCURRENT"}
)

// setEnv sets each of names to its value; a value the process
// environment cannot hold (a NUL byte) skips the input.
func setEnv(t *testing.T, names []string, values ...string) map[string]string {
	t.Helper()
	set := map[string]string{}
	for i, name := range names {
		if strings.ContainsRune(values[i], 0) {
			t.Skip("the environment cannot hold a NUL byte")
		}
		t.Setenv(name, values[i])
		if strings.TrimSpace(values[i]) != "" {
			set[name] = values[i]
		}
	}
	return set
}

// checkEnvError checks that a reader's error names only variables that
// were set, one line each, as the lenient reader reported them.
func checkEnvError(t *testing.T, err error, set map[string]string, fallbacks []ratewise.EnvFallback) {
	t.Helper()
	if err == nil {
		if len(fallbacks) != 0 {
			t.Fatalf("no error, but the lenient reader fell back on %+v", fallbacks)
		}
		return
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(fallbacks) {
		t.Fatalf("error of %d lines, lenient fallbacks %+v:\n%v", len(lines), fallbacks, err)
	}
	for i, fb := range fallbacks {
		if _, ok := set[fb.Var]; !ok || fb.Reason == "" {
			t.Fatalf("fallback %+v is not of a variable set (%v), or says nothing", fb, set)
		}
		if prefix := "ratewise: " + fb.Var + "="; !strings.HasPrefix(lines[i], prefix) {
			t.Fatalf("error line %q does not start with %q", lines[i], prefix)
		}
	}
}

// envMillisOrDuration is the oracle of an env duration: whole
// milliseconds or a Go duration, not negative.
func envMillisOrDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond, ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond)
	}
	d, err := time.ParseDuration(s)
	return d, err == nil && d >= 0
}

func FuzzPolicyFromEnv(f *testing.F) {
	for _, s := range [][6]string{
		{"", "", "", "", "", ""},
		{"7", "250", "1m30s", "5m", "1.5", "Proportional"},
		{"0", "soon", "-5s", "-100", "0.5", "some"},
		{"99999999999", "99999999999", "9223372036854775807", "2562047h47m16.854775807s", "NaN", "FULL"},
		{"-1", "10s", "2s", "1s", "+Inf", " none "},
		{"3", "5m", "", "", "1e308", "none\n"},
		{"1.5", "1.5s", "0", "0", "1", "\x1b[31m"},
		{" 4 ", "0", "1ms", "-0s", "1.0000000000000002", "full"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, attempts, initial, maxDelay, total, multiplier, jitter string) {
		set := setEnv(t, policyVars, attempts, initial, maxDelay, total, multiplier, jitter)
		p, err := ratewise.PolicyFromEnv("FZ")
		var fallbacks []ratewise.EnvFallback
		lenient := ratewise.PolicyFromEnvLenient("FZ_", func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
		if verr := lenient.Validate(); verr != nil {
			t.Fatalf("PolicyFromEnvLenient = %+v, which does not validate: %v", lenient, verr)
		}
		checkEnvError(t, err, set, fallbacks)
		if err != nil {
			if !reflect.DeepEqual(p, ratewise.RetryPolicy{}) {
				t.Fatalf("PolicyFromEnv failed but returned %+v, want the zero policy", p)
			}
		} else {
			if verr := p.Validate(); verr != nil {
				t.Fatalf("PolicyFromEnv = %+v, nil; it does not validate: %v", p, verr)
			}
			if !reflect.DeepEqual(p, lenient) {
				t.Fatalf("PolicyFromEnv = %+v, lenient %+v; want the same with no error", p, lenient)
			}
		}

		// Each variable that is fine alone comes through, or is reported.
		fellBack := map[string]bool{}
		for _, fb := range fallbacks {
			fellBack[fb.Var] = true
		}
		if n, aerr := strconv.Atoi(strings.TrimSpace(attempts)); aerr == nil && n >= 1 {
			if lenient.MaxAttempts != n {
				t.Fatalf("FZ_RETRY_MAX_ATTEMPTS=%q read as %d", attempts, lenient.MaxAttempts)
			}
		} else if lenient.MaxAttempts != 0 || set["FZ_RETRY_MAX_ATTEMPTS"] != "" && !fellBack["FZ_RETRY_MAX_ATTEMPTS"] {
			t.Fatalf("FZ_RETRY_MAX_ATTEMPTS=%q read as %d, fallbacks %+v", attempts, lenient.MaxAttempts, fallbacks)
		}
		if m, merr := strconv.ParseFloat(strings.TrimSpace(multiplier), 64); merr == nil && m >= 1 && !math.IsInf(m, 0) {
			if lenient.Multiplier != m {
				t.Fatalf("FZ_RETRY_MULTIPLIER=%q read as %v", multiplier, lenient.Multiplier)
			}
		} else if lenient.Multiplier != 0 || set["FZ_RETRY_MULTIPLIER"] != "" && !fellBack["FZ_RETRY_MULTIPLIER"] {
			t.Fatalf("FZ_RETRY_MULTIPLIER=%q read as %v, fallbacks %+v", multiplier, lenient.Multiplier, fallbacks)
		}
		if mode := strings.ToLower(strings.TrimSpace(jitter)); mode == "full" || mode == "proportional" || mode == "none" {
			if lenient.Jitter.String() != mode {
				t.Fatalf("FZ_RETRY_JITTER=%q read as %v", jitter, lenient.Jitter)
			}
		} else if set["FZ_RETRY_JITTER"] != "" && !fellBack["FZ_RETRY_JITTER"] {
			t.Fatalf("FZ_RETRY_JITTER=%q not reported", jitter)
		}
		for _, v := range []struct {
			name, value string
			got         time.Duration
		}{
			{"FZ_RETRY_INITIAL_DELAY", initial, lenient.InitialDelay},
			{"FZ_RETRY_MAX_DELAY", maxDelay, lenient.MaxDelay},
			{"FZ_RETRY_TOTAL_CAP", total, lenient.TotalWaitCap},
		} {
			want, valid := envMillisOrDuration(v.value)
			switch {
			case v.got < 0:
				t.Fatalf("%s=%q read as %v", v.name, v.value, v.got)
			case set[v.name] == "":
				if v.got != 0 {
					t.Fatalf("%s unset read as %v", v.name, v.got)
				}
			case !valid && !fellBack[v.name]:
				t.Fatalf("%s=%q is no duration, and was not reported", v.name, v.value)
			case !fellBack[v.name] && v.got != want:
				t.Fatalf("%s=%q read as %v, want %v", v.name, v.value, v.got, want)
			case fellBack[v.name] && v.got != 0:
				t.Fatalf("%s=%q reported, yet read as %v", v.name, v.value, v.got)
			}
		}
	})
}

func FuzzLimitFromEnv(f *testing.F) {
	for _, s := range [][4]string{
		{"", "", "", ""},
		{"", "2.5", "40", "4"},
		{"1100", "", "1", "0"},
		{"1d", "fast", "0", "-1"},
		{"1s", "5", "", ""},
		{"", "30/m", "99999999999", "99999999999999999999"},
		{"", "1e-321/h", "", ""},
		{"", "1e-320", "", ""},
		{"-1", "NaN", "1.5", " 2 "},
		{"", "1e309/s", "", ""},
		{"0", "90 / MIN", "5", ""},
		{"", "5/fortnight", "\t", "\n"},
		{"", "/", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, minDelay, rate, burst, maxConcurrent string) {
		set := setEnv(t, limitVars, minDelay, rate, burst, maxConcurrent)
		l, err := ratewise.LimitFromEnv("FZ")
		var fallbacks []ratewise.EnvFallback
		lenient := ratewise.LimitFromEnvLenient("FZ_", func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
		if verr := lenient.Validate(); verr != nil {
			t.Fatalf("LimitFromEnvLenient = %+v, which does not validate: %v", lenient, verr)
		}
		checkEnvError(t, err, set, fallbacks)
		if err != nil {
			if !reflect.DeepEqual(l, ratewise.Limit{}) {
				t.Fatalf("LimitFromEnv failed but returned %+v, want the zero Limit", l)
			}
		} else {
			if verr := l.Validate(); verr != nil {
				t.Fatalf("LimitFromEnv = %+v, nil; it does not validate: %v", l, verr)
			}
			if !reflect.DeepEqual(l, lenient) || l.Name != "fz" {
				t.Fatalf("LimitFromEnv = %+v, lenient %+v; want the same, named fz", l, lenient)
			}
		}

		fellBack := map[string]bool{}
		for _, fb := range fallbacks {
			fellBack[fb.Var] = true
		}
		// A rate read is a pace: above zero and finite. Zero would mean no
		// bucket at all.
		r := float64(lenient.Rate)
		switch {
		case set["FZ_RATE"] == "" || fellBack["FZ_RATE"]:
			if r != 0 {
				t.Fatalf("FZ_RATE=%q (fallbacks %+v) read as %v, want 0", rate, fallbacks, r)
			}
		case !(r > 0) || math.IsInf(r, 0):
			t.Fatalf("FZ_RATE=%q read as %v, want a finite rate above 0", rate, r)
		}
		if lenient.Rate != 0 && lenient.MinSpacing != 0 || lenient.MinSpacing < 0 {
			t.Fatalf("lenient Limit %+v paces by both a rate and a spacing", lenient)
		}
		if n, berr := strconv.Atoi(strings.TrimSpace(burst)); berr == nil && n >= 1 {
			if lenient.Burst != n {
				t.Fatalf("FZ_BURST=%q read as %d", burst, lenient.Burst)
			}
		} else if lenient.Burst != 0 || set["FZ_BURST"] != "" && !fellBack["FZ_BURST"] {
			t.Fatalf("FZ_BURST=%q read as %d, fallbacks %+v", burst, lenient.Burst, fallbacks)
		}
		if n, cerr := strconv.Atoi(strings.TrimSpace(maxConcurrent)); cerr == nil && n >= 0 {
			if lenient.MaxConcurrent != n {
				t.Fatalf("FZ_MAX_CONCURRENT=%q read as %d", maxConcurrent, lenient.MaxConcurrent)
			}
		} else if lenient.MaxConcurrent != 0 || set["FZ_MAX_CONCURRENT"] != "" && !fellBack["FZ_MAX_CONCURRENT"] {
			t.Fatalf("FZ_MAX_CONCURRENT=%q read as %d, fallbacks %+v", maxConcurrent, lenient.MaxConcurrent, fallbacks)
		}
	})
}
