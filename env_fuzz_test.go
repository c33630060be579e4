package ratewise_test

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// This file fuzzes PolicyFromEnv and LimitFromEnv: any value of their
// variables is either read as its documented meaning or refused with an
// error naming the variable.

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
