package ratewise_test

import (
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

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
	type defaults struct {
		attempts                 int
		initial, maxDelay, total int64
		multiplier               float64
		jitter                   uint8
	}
	none := defaults{}
	some := defaults{3, int64(2 * time.Second), int64(10 * time.Second), int64(time.Minute), 1.5, 1}
	bad := defaults{-1, int64(time.Minute), int64(time.Second), -5, 0.5, 9}
	for _, s := range []struct {
		env [6]string
		def defaults
	}{
		{[6]string{"", "", "", "", "", ""}, none},
		{[6]string{"", "", "", "", "", ""}, some},
		{[6]string{"", "", "", "", "", ""}, bad},
		{[6]string{"7", "250", "1m30s", "5m", "1.5", "Proportional"}, none},
		{[6]string{"7", "250", "1m30s", "5m", "1.5", "Proportional"}, some},
		{[6]string{"0", "soon", "-5s", "-100", "0.5", "some"}, some},
		{[6]string{"99999999999", "99999999999", "9223372036854775807", "2562047h47m16.854775807s", "NaN", "FULL"}, none},
		{[6]string{"-1", "10s", "2s", "1s", "+Inf", " none "}, none},
		{[6]string{"-1", "10s", "2s", "1s", "+Inf", " none "}, some},
		{[6]string{"", "20s", "", "", "", ""}, some},
		{[6]string{"", "", "1s", "30s", "", ""}, some},
		{[6]string{"3", "5m", "", "", "1e308", "none\n"}, none},
		{[6]string{"1.5", "1.5s", "0", "0", "1", "\x1b[31m"}, bad},
		{[6]string{" 4 ", "0", "1ms", "-0s", "1.0000000000000002", "full"}, some},
	} {
		f.Add(s.env[0], s.env[1], s.env[2], s.env[3], s.env[4], s.env[5],
			s.def.attempts, s.def.initial, s.def.maxDelay, s.def.total, s.def.multiplier, s.def.jitter)
	}
	f.Fuzz(func(t *testing.T, attempts, initial, maxDelay, total, multiplier, jitter string,
		defAttempts int, defInitial, defMax, defTotal int64, defMultiplier float64, defJitter uint8) {
		set := setEnv(t, policyVars, attempts, initial, maxDelay, total, multiplier, jitter)
		p, err := ratewise.PolicyFromEnv("FZ")
		var fallbacks []ratewise.EnvFallback
		lenient := ratewise.PolicyFromEnvLenient("FZ_", ratewise.RetryPolicy{}, func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
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
		checkLenientPolicy(t, set, ratewise.RetryPolicy{}, lenient, fallbacks)

		// The same environment over defaults of the input's: the policy
		// validates whatever they are, and each variable comes through or
		// falls back to the defaults' value for its field.
		defaults := ratewise.RetryPolicy{MaxAttempts: defAttempts, InitialDelay: time.Duration(defInitial),
			MaxDelay: time.Duration(defMax), TotalWaitCap: time.Duration(defTotal), Multiplier: defMultiplier,
			Jitter: ratewise.Jitter(defJitter)}
		fallbacks = nil
		over := ratewise.PolicyFromEnvLenient("FZ", defaults, func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
		if verr := over.Validate(); verr != nil {
			t.Fatalf("PolicyFromEnvLenient over %+v = %+v, which does not validate: %v", defaults, over, verr)
		}
		checkLenientPolicy(t, set, defaults, over, fallbacks)
	})
}

// checkLenientPolicy checks what PolicyFromEnvLenient read over defaults:
// each variable set and good comes through, unless reported; every other
// field is the defaults', or the zero policy's when the defaults do not
// validate, which is reported first.
func checkLenientPolicy(t *testing.T, set map[string]string, defaults, got ratewise.RetryPolicy, fallbacks []ratewise.EnvFallback) {
	t.Helper()
	base := defaults
	if defaults.Validate() != nil {
		if len(fallbacks) == 0 || fallbacks[0].Var != "" || fallbacks[0].Used != "the library defaults" {
			t.Fatalf("defaults %+v do not validate, and the first fallback of %+v does not say so", defaults, fallbacks)
		}
		base, fallbacks = ratewise.RetryPolicy{}, fallbacks[1:]
	}
	fellBack := map[string]bool{}
	for _, fb := range fallbacks {
		if set[fb.Var] == "" || fb.Reason == "" || fb.Used == "" || fb.Value != strings.TrimSpace(set[fb.Var]) {
			t.Fatalf("fallback %+v: not of a variable set (%v), or its value, reason or value used missing", fb, set)
		}
		fellBack[fb.Var] = true
	}
	used := func(name string) string {
		for _, fb := range fallbacks {
			if fb.Var == name {
				return fb.Used
			}
		}
		return ""
	}
	if n, aerr := strconv.Atoi(strings.TrimSpace(set["FZ_RETRY_MAX_ATTEMPTS"])); aerr == nil && n >= 1 {
		if got.MaxAttempts != n || fellBack["FZ_RETRY_MAX_ATTEMPTS"] {
			t.Fatalf("FZ_RETRY_MAX_ATTEMPTS=%q read as %d, fallbacks %+v", set["FZ_RETRY_MAX_ATTEMPTS"], got.MaxAttempts, fallbacks)
		}
	} else if got.MaxAttempts != base.MaxAttempts || set["FZ_RETRY_MAX_ATTEMPTS"] != "" && !fellBack["FZ_RETRY_MAX_ATTEMPTS"] {
		t.Fatalf("FZ_RETRY_MAX_ATTEMPTS=%q read as %d over %d, fallbacks %+v", set["FZ_RETRY_MAX_ATTEMPTS"], got.MaxAttempts, base.MaxAttempts, fallbacks)
	}
	multiplier := set["FZ_RETRY_MULTIPLIER"]
	if m, merr := strconv.ParseFloat(strings.TrimSpace(multiplier), 64); merr == nil && m >= 1 && !math.IsInf(m, 0) {
		if got.Multiplier != m {
			t.Fatalf("FZ_RETRY_MULTIPLIER=%q read as %v", multiplier, got.Multiplier)
		}
	} else if got.Multiplier != base.Multiplier || multiplier != "" && !fellBack["FZ_RETRY_MULTIPLIER"] {
		t.Fatalf("FZ_RETRY_MULTIPLIER=%q read as %v over %v, fallbacks %+v", multiplier, got.Multiplier, base.Multiplier, fallbacks)
	}
	jitter := set["FZ_RETRY_JITTER"]
	if mode := strings.ToLower(strings.TrimSpace(jitter)); mode == "full" || mode == "proportional" || mode == "none" {
		if got.Jitter.String() != mode {
			t.Fatalf("FZ_RETRY_JITTER=%q read as %v", jitter, got.Jitter)
		}
	} else if got.Jitter != base.Jitter || jitter != "" && !fellBack["FZ_RETRY_JITTER"] {
		t.Fatalf("FZ_RETRY_JITTER=%q read as %v over %v, fallbacks %+v", jitter, got.Jitter, base.Jitter, fallbacks)
	}
	for _, v := range []struct {
		name      string
		got, base time.Duration
		def       time.Duration // the library's default
	}{
		{"FZ_RETRY_INITIAL_DELAY", got.InitialDelay, base.InitialDelay, ratewise.DefaultInitialDelay},
		{"FZ_RETRY_MAX_DELAY", got.MaxDelay, base.MaxDelay, ratewise.DefaultMaxDelay},
		{"FZ_RETRY_TOTAL_CAP", got.TotalWaitCap, base.TotalWaitCap, ratewise.DefaultTotalWaitCap},
	} {
		want, valid := envMillisOrDuration(set[v.name])
		switch {
		case v.got < 0:
			t.Fatalf("%s=%q read as %v", v.name, set[v.name], v.got)
		case set[v.name] == "":
			if v.got != v.base {
				t.Fatalf("%s unset read as %v, want the defaults' %v", v.name, v.got, v.base)
			}
		case !valid && !fellBack[v.name]:
			t.Fatalf("%s=%q is no duration, and was not reported", v.name, set[v.name])
		case !fellBack[v.name] && v.got != want:
			t.Fatalf("%s=%q read as %v, want %v", v.name, set[v.name], v.got, want)
		case fellBack[v.name] && v.got != v.base:
			t.Fatalf("%s=%q reported, yet read as %v, not the defaults' %v", v.name, set[v.name], v.got, v.base)
		case fellBack[v.name] && v.got != 0 && used(v.name) != v.got.String():
			t.Fatalf("%s=%q fell back to %v, but the report says %q was used", v.name, set[v.name], v.got, used(v.name))
		case fellBack[v.name] && v.got == 0 && used(v.name) != v.def.String()+" (the library default)":
			t.Fatalf("%s=%q fell back to the library default %v, but the report says %q was used", v.name, set[v.name], v.def, used(v.name))
		}
	}
}

func FuzzLimitFromEnv(f *testing.F) {
	type defaults struct {
		rate                   float64
		burst                  int
		spacing, window        int64
		maxConcurrent, reserve int
		adaptive               bool
	}
	none := defaults{}
	spaced := defaults{spacing: int64(2 * time.Second), burst: 4, maxConcurrent: 2}
	bucket := defaults{rate: 5, burst: 10, reserve: 4}
	window := defaults{burst: 30, window: int64(time.Minute)}
	learned := defaults{adaptive: true, rate: 100}
	bad := defaults{rate: 5, spacing: int64(time.Second), burst: -1}
	for _, s := range []struct {
		env [4]string
		def defaults
	}{
		{[4]string{"", "", "", ""}, none},
		{[4]string{"", "", "", ""}, bad},
		{[4]string{"", "2.5", "40", "4"}, none},
		{[4]string{"", "2.5", "40", "4"}, spaced},
		{[4]string{"", "2.5", "3", ""}, bucket},
		{[4]string{"-500", "", "", ""}, spaced},
		{[4]string{"1100", "", "1", "0"}, none},
		{[4]string{"1100", "", "1", "0"}, bucket},
		{[4]string{"1100", "", "99999", ""}, window},
		{[4]string{"", "", "99999", ""}, window},
		{[4]string{"1s", "", "", ""}, learned},
		{[4]string{"1d", "fast", "0", "-1"}, spaced},
		{[4]string{"1s", "5", "", ""}, none},
		{[4]string{"1s", "5", "", ""}, window},
		{[4]string{"", "30/m", "99999999999", "99999999999999999999"}, none},
		{[4]string{"", "1e-321/h", "", ""}, none},
		{[4]string{"", "1e-320", "", ""}, none},
		{[4]string{"-1", "NaN", "1.5", " 2 "}, none},
		{[4]string{"", "1e309/s", "", ""}, none},
		{[4]string{"0", "90 / MIN", "5", ""}, none},
		{[4]string{"0", "", "", ""}, spaced},
		{[4]string{"", "5/fortnight", "\t", "\n"}, none},
		{[4]string{"", "/", "", ""}, none},
	} {
		d := s.def
		f.Add(s.env[0], s.env[1], s.env[2], s.env[3], d.rate, d.burst, d.spacing, d.window, d.maxConcurrent, d.reserve, d.adaptive)
	}
	f.Fuzz(func(t *testing.T, minDelay, rate, burst, maxConcurrent string,
		defRate float64, defBurst int, defSpacing, defWindow int64, defConcurrent, defReserve int, defAdaptive bool) {
		set := setEnv(t, limitVars, minDelay, rate, burst, maxConcurrent)
		l, err := ratewise.LimitFromEnv("FZ")
		var fallbacks []ratewise.EnvFallback
		lenient := ratewise.LimitFromEnvLenient("FZ_", ratewise.Limit{}, func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
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
		checkLenientLimit(t, set, ratewise.Limit{}, lenient, fallbacks)

		// The same environment over defaults of the input's: the Limit
		// validates whatever they are, and each variable comes through or
		// falls back to the defaults' value for its field.
		defaults := ratewise.Limit{Name: "defaults", Rate: rateOf(defRate), Burst: defBurst, MinSpacing: time.Duration(defSpacing),
			Window: time.Duration(defWindow), MaxConcurrent: defConcurrent, Reserve: defReserve, Adaptive: defAdaptive}
		fallbacks = nil
		over := ratewise.LimitFromEnvLenient("FZ", defaults, func(fb ratewise.EnvFallback) { fallbacks = append(fallbacks, fb) })
		if verr := over.Validate(); verr != nil {
			t.Fatalf("LimitFromEnvLenient over %+v = %+v, which does not validate: %v", defaults, over, verr)
		}
		checkLenientLimit(t, set, defaults, over, fallbacks)
	})
}

// checkLenientLimit checks what LimitFromEnvLenient read over defaults:
// each variable set and good comes through, unless reported; a pace set
// replaces the defaults'; every other field is the defaults', or the zero
// Limit's when the defaults do not validate, which is reported first.
func checkLenientLimit(t *testing.T, set map[string]string, defaults, got ratewise.Limit, fallbacks []ratewise.EnvFallback) {
	t.Helper()
	base := defaults
	if base.Name == "" {
		base.Name = "fz"
	}
	if base.Validate() != nil {
		if len(fallbacks) == 0 || fallbacks[0].Var != "" || fallbacks[0].Used != "the library defaults" {
			t.Fatalf("defaults %+v do not validate, and the first fallback of %+v does not say so", defaults, fallbacks)
		}
		base, fallbacks = ratewise.Limit{Name: base.Name}, fallbacks[1:]
	}
	fellBack := map[string]bool{}
	for _, fb := range fallbacks {
		if set[fb.Var] == "" || fb.Reason == "" || fb.Used == "" || fb.Value != strings.TrimSpace(set[fb.Var]) {
			t.Fatalf("fallback %+v: not of a variable set (%v), or its value, reason or value used missing", fb, set)
		}
		fellBack[fb.Var] = true
	}
	if got.Name != base.Name || got.Adaptive != base.Adaptive || got.Reserve != base.Reserve {
		t.Fatalf("Limit %+v over %+v: a field no variable sets changed", got, base)
	}
	// The pace: a rate read is above zero and finite (zero would mean no
	// bucket at all) and replaces the defaults' pace; so does a spacing
	// above zero. Otherwise the defaults' pace stays.
	perSecond, rateOK := float64(got.Rate), set["FZ_RATE"] != "" && !fellBack["FZ_RATE"]
	spacing, spacingValid := envMillisOrDuration(set["FZ_MIN_DELAY"])
	spacingOK := set["FZ_MIN_DELAY"] != "" && !fellBack["FZ_MIN_DELAY"]
	switch {
	case set["FZ_RATE"] != "" && !fellBack["FZ_RATE"] && !(perSecond > 0 && !math.IsInf(perSecond, 0)):
		t.Fatalf("FZ_RATE=%q read as %v, want a finite rate above 0", set["FZ_RATE"], perSecond)
	case rateOK:
		if got.MinSpacing != 0 || got.Window != 0 {
			t.Fatalf("FZ_RATE=%q read, but the defaults' pace stays: %+v", set["FZ_RATE"], got)
		}
	case spacingOK && !spacingValid:
		t.Fatalf("FZ_MIN_DELAY=%q is no duration, and was not reported", set["FZ_MIN_DELAY"])
	case spacingOK && spacing > 0:
		if got.MinSpacing != spacing || got.Rate != 0 || got.Window != 0 {
			t.Fatalf("FZ_MIN_DELAY=%q read as %+v, want its spacing alone", set["FZ_MIN_DELAY"], got)
		}
	case spacingOK:
		if got.MinSpacing != 0 || got.Rate != base.Rate || got.Window != base.Window {
			t.Fatalf("FZ_MIN_DELAY=%q read as %+v over %+v", set["FZ_MIN_DELAY"], got, base)
		}
	default:
		if got.Rate != base.Rate || got.MinSpacing != base.MinSpacing || got.Window != base.Window {
			t.Fatalf("no pace read (%v, fallbacks %+v), yet %+v is not the defaults' %+v", set, fallbacks, got, base)
		}
	}
	if got.Rate != 0 && got.MinSpacing != 0 || got.MinSpacing < 0 {
		t.Fatalf("lenient Limit %+v paces by both a rate and a spacing", got)
	}
	burst := set["FZ_BURST"]
	if n, berr := strconv.Atoi(strings.TrimSpace(burst)); berr == nil && n >= 1 && !fellBack["FZ_BURST"] {
		if got.Burst != n {
			t.Fatalf("FZ_BURST=%q read as %d", burst, got.Burst)
		}
	} else if got.Burst != base.Burst || burst != "" && !fellBack["FZ_BURST"] {
		t.Fatalf("FZ_BURST=%q read as %d over %d, fallbacks %+v", burst, got.Burst, base.Burst, fallbacks)
	}
	maxConcurrent := set["FZ_MAX_CONCURRENT"]
	if n, cerr := strconv.Atoi(strings.TrimSpace(maxConcurrent)); cerr == nil && n >= 0 {
		if got.MaxConcurrent != n || fellBack["FZ_MAX_CONCURRENT"] {
			t.Fatalf("FZ_MAX_CONCURRENT=%q read as %d, fallbacks %+v", maxConcurrent, got.MaxConcurrent, fallbacks)
		}
	} else if got.MaxConcurrent != base.MaxConcurrent || maxConcurrent != "" && !fellBack["FZ_MAX_CONCURRENT"] {
		t.Fatalf("FZ_MAX_CONCURRENT=%q read as %d over %d, fallbacks %+v", maxConcurrent, got.MaxConcurrent, base.MaxConcurrent, fallbacks)
	}
}

// rateOf is f as a rate, for a fuzz target whose parameter named rate
// hides the package.
func rateOf(f float64) rate.Limit { return rate.Limit(f) }
