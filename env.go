package ratewise

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// This file reads a retry policy and a limit from environment variables,
// so that an operator can turn a client down without a new build:
//
//	<P>_RETRY_MAX_ATTEMPTS   attempts, the first included (≥ 1)
//	<P>_RETRY_INITIAL_DELAY  backoff before the first retry
//	<P>_RETRY_MAX_DELAY      cap of the computed backoff
//	<P>_RETRY_TOTAL_CAP      most a call may wait in all
//	<P>_RETRY_MULTIPLIER     backoff growth per retry (≥ 1)
//	<P>_RETRY_JITTER         full, proportional or none
//	<P>_MIN_DELAY            least gap between request starts
//	<P>_RATE                 requests a second ("2.5"), or per unit ("30/m", "600/h")
//	<P>_BURST                token bucket size (≥ 1)
//	<P>_MAX_CONCURRENT       requests in flight at most (0: no cap)
//
// Durations are Go durations ("5s", "1m30s") or whole milliseconds
// ("5000"). A variable not set, or set empty, leaves its field as the
// defaults have it: zero for the strict readers, which means the
// library's default. A value of 0 sets the field to zero, whose meaning
// the field's documentation gives (no spacing for MIN_DELAY).

// EnvFallback reports a variable the lenient readers did not use: its
// value was bad, or clashed with another's, and the defaults' value for
// its field stands in.
type EnvFallback struct {
	// Var and Value are the variable and the value it holds, trimmed.
	// Both are empty when the defaults given to the reader do not
	// validate: the library's defaults then stand in for them whole.
	Var, Value string
	Reason     string // what was wrong, and what is allowed
	// Used is the value in force instead, written as the variable takes
	// it ("2s", "0.5", "3"). When the field is zero, Used says what the
	// zero stands for in parentheses: the library's default, such as
	// "5 (the library default)" or "1s (the library default)", or none,
	// such as "0s (no spacing)", "0 (no token bucket)" or "0 (no cap)".
	// For defaults refused whole, it is "the library defaults".
	Used string
}

// PolicyFromEnv reads a RetryPolicy from the <prefix>_RETRY_* variables.
// Any bad value makes it return one error naming every bad variable, its
// value and what is allowed; the policy it returns then is the zero one.
// The policy it returns with a nil error passes Validate.
func PolicyFromEnv(prefix string) (RetryPolicy, error) {
	return fromEnv(prefix, func(r *envReader) RetryPolicy { return r.policy(RetryPolicy{}) })
}

// PolicyFromEnvLenient is PolicyFromEnv that never fails, over defaults:
// a variable not set keeps the defaults' value for its field; a bad one,
// or one that clashes with another (a max delay below the initial delay,
// the defaults' standing in for those not set), falls back to the
// defaults' value for its field, and report (when not nil) is told, with
// the value used instead. The policy returned always passes Validate:
// defaults that do not are replaced whole by the zero policy (the
// library's defaults), and report is told so first, with an empty Var.
func PolicyFromEnvLenient(prefix string, defaults RetryPolicy, report func(EnvFallback)) RetryPolicy {
	return fromEnvLenient(prefix, func(r *envReader) RetryPolicy { return r.policy(defaults) }, report)
}

// LimitFromEnv reads a Limit from <prefix>_MIN_DELAY, _RATE, _BURST and
// _MAX_CONCURRENT, named prefix (lower case). Bad values make it return one
// error naming every bad variable; the Limit it returns with a nil error
// passes Validate.
func LimitFromEnv(prefix string) (Limit, error) {
	return fromEnv(prefix, func(r *envReader) Limit { return r.limit(Limit{}) })
}

// LimitFromEnvLenient is LimitFromEnv that never fails, over defaults: a
// variable not set keeps the defaults' value; a bad one falls back to it,
// and report (when not nil) is told, with the value used. A pace the
// environment sets replaces the defaults' pace. The Limit always passes
// Validate: defaults that do not are replaced by the zero Limit, and report
// is told so first, with an empty Var. See "Environment" in the package
// doc.
func LimitFromEnvLenient(prefix string, defaults Limit, report func(EnvFallback)) Limit {
	return fromEnvLenient(prefix, func(r *envReader) Limit { return r.limit(defaults) }, report)
}

// fromEnv reads a value with read, or returns the zero value and one
// error naming every bad variable.
func fromEnv[T any](prefix string, read func(*envReader) T) (T, error) {
	r := envReader{prefix: envPrefix(prefix)}
	v := read(&r)
	if err := r.err(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// fromEnvLenient reads a value with read, falling back where a variable
// is bad and telling report of each.
func fromEnvLenient[T any](prefix string, read func(*envReader) T, report func(EnvFallback)) T {
	r := envReader{prefix: envPrefix(prefix)}
	v := read(&r)
	r.report(report)
	return v
}

func envPrefix(prefix string) string {
	prefix = strings.TrimSuffix(prefix, "_")
	if prefix == "" {
		return ""
	}
	return prefix + "_"
}

// envReader reads variables, collecting what was wrong with them.
type envReader struct {
	prefix   string
	problems []envProblem
}

// envProblem is a variable not used. used says what stands in for it,
// once the value read is final.
type envProblem struct {
	EnvFallback
	used func() string
}

// lookup returns the value of <prefix>name, "" when unset.
func (r *envReader) lookup(name string) (string, string) {
	v := r.prefix + name
	return v, strings.TrimSpace(os.Getenv(v))
}

func (r *envReader) bad(v, value, reason string, used func() string) {
	r.problems = append(r.problems, envProblem{EnvFallback{Var: v, Value: value, Reason: reason}, used})
}

// refuseDefaults notes defaults that do not validate.
func (r *envReader) refuseDefaults(err error) {
	reason := "the defaults given do not validate: " + oneLine(err)
	r.bad("", "", reason, func() string { return "the library defaults" })
}

// oneLine is err's message on one line: each problem is one line of an
// env error.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

func (r *envReader) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	errs := make([]error, len(r.problems))
	for i, p := range r.problems {
		errs[i] = fmt.Errorf("ratewise: %s=%q: %s", p.Var, p.Value, p.Reason)
	}
	return errors.Join(errs...)
}

func (r *envReader) report(report func(EnvFallback)) {
	if report == nil {
		return
	}
	for _, p := range r.problems {
		fb := p.EnvFallback
		fb.Used = p.used()
		report(fb)
	}
}

// duration reads <prefix>name: its variable, its value as written, and
// the duration, ok when set and good.
func (r *envReader) duration(name string, used func() string) (v, s string, d time.Duration, ok bool) {
	v, s = r.lookup(name)
	if s == "" {
		return v, s, 0, false
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		return v, s, time.Duration(ms) * time.Millisecond, true
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return v, s, d, true
	}
	r.bad(v, s, `want a duration such as "5s" or "1m30s", or whole milliseconds, not negative`, used)
	return v, s, 0, false
}

// integer reads <prefix>name as a whole number of at least least: its
// variable, its value as written, and the number, ok when set and good.
func (r *envReader) integer(name string, least int, allowed string, used func() string) (v, s string, n int, ok bool) {
	v, s = r.lookup(name)
	if s == "" {
		return v, s, 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		r.bad(v, s, "want "+allowed, used)
		return v, s, 0, false
	}
	return v, s, n, true
}

// policy reads the policy's variables over defaults.
func (r *envReader) policy(defaults RetryPolicy) RetryPolicy {
	base := defaults
	if err := base.Validate(); err != nil {
		r.refuseDefaults(err)
		base = RetryPolicy{}
	}
	p := base
	if _, _, n, ok := r.integer("RETRY_MAX_ATTEMPTS", 1, "a whole number of attempts, at least 1",
		func() string { return usedInt(p.MaxAttempts, DefaultMaxAttempts, "") }); ok {
		p.MaxAttempts = n
	}
	usedInitial := func() string { return usedDuration(p.InitialDelay, DefaultInitialDelay, "") }
	usedMax := func() string { return usedDuration(p.MaxDelay, DefaultMaxDelay, "") }
	usedTotal := func() string { return usedDuration(p.TotalWaitCap, DefaultTotalWaitCap, "") }
	initialVar, initialRaw, initial, initialOK := r.duration("RETRY_INITIAL_DELAY", usedInitial)
	maxVar, maxRaw, maxDelay, maxOK := r.duration("RETRY_MAX_DELAY", usedMax)
	totalVar, totalRaw, total, totalOK := r.duration("RETRY_TOTAL_CAP", usedTotal)
	if v, s := r.lookup("RETRY_MULTIPLIER"); s != "" {
		m, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(m) || math.IsInf(m, 0) || m < 1 {
			r.bad(v, s, "want a finite number of at least 1", func() string {
				if p.Multiplier == 0 {
					return strconv.FormatFloat(DefaultMultiplier, 'g', -1, 64) + " (the library default)"
				}
				return strconv.FormatFloat(p.Multiplier, 'g', -1, 64)
			})
		} else {
			p.Multiplier = m
		}
	}
	if v, s := r.lookup("RETRY_JITTER"); s != "" {
		switch strings.ToLower(s) {
		case "full":
			p.Jitter = JitterFull
		case "proportional":
			p.Jitter = JitterProportional
		case "none":
			p.Jitter = JitterNone
		default:
			r.bad(v, s, "want full, proportional or none", func() string { return p.Jitter.String() })
		}
	}
	// The delays must keep their order, the defaults standing in for what
	// is not set and the library's for what is zero. One that does not
	// falls back to the defaults' value, which keeps it with the others:
	// the defaults are in order, and so is what the environment set.
	if initialOK {
		p.InitialDelay = initial
	}
	if maxOK {
		p.MaxDelay = maxDelay
	}
	if totalOK {
		p.TotalWaitCap = total
	}
	effective := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	initialIs := func() time.Duration { return effective(p.InitialDelay, DefaultInitialDelay) }
	if maxOK && initialIs() > effective(p.MaxDelay, DefaultMaxDelay) {
		r.bad(maxVar, maxRaw, fmt.Sprintf("want at least the initial delay (%v)", initialIs()), usedMax)
		p.MaxDelay = base.MaxDelay
	}
	if totalOK && initialIs() > effective(p.TotalWaitCap, DefaultTotalWaitCap) {
		r.bad(totalVar, totalRaw, fmt.Sprintf("want at least the initial delay (%v)", initialIs()), usedTotal)
		p.TotalWaitCap = base.TotalWaitCap
	}
	if maxIs, totalIs := effective(p.MaxDelay, DefaultMaxDelay), effective(p.TotalWaitCap, DefaultTotalWaitCap); initialOK && (initialIs() > maxIs || initialIs() > totalIs) {
		r.bad(initialVar, initialRaw, fmt.Sprintf("want at most the max delay (%v) and the total cap (%v)", maxIs, totalIs), usedInitial)
		p.InitialDelay = base.InitialDelay
	}
	return p
}

// envSetting is a value the environment set in a Limit, and how to take
// it back to the defaults'.
type envSetting struct {
	v, s   string
	revert func(*Limit)
	used   func() string
}

// limit reads the limit's variables over defaults.
func (r *envReader) limit(defaults Limit) Limit {
	base := defaults
	if base.Name == "" {
		base.Name = strings.ToLower(strings.TrimSuffix(r.prefix, "_"))
	}
	if err := base.Validate(); err != nil {
		r.refuseDefaults(err)
		base = Limit{Name: base.Name}
	}
	l := base
	usedSpacing := func() string { return usedDuration(l.MinSpacing, 0, "no spacing") }
	usedRate := func() string {
		if l.Rate == 0 {
			return "0 (no token bucket)"
		}
		return strconv.FormatFloat(float64(l.Rate), 'g', -1, 64)
	}
	usedBurst := func() string { return usedInt(l.Burst, DefaultBurst, "") }
	usedConcurrent := func() string { return usedInt(l.MaxConcurrent, 0, "no cap") }
	var set []envSetting

	spacingVar, spacingRaw, spacing, spacingOK := r.duration("MIN_DELAY", usedSpacing)
	rateVar, rateRaw := r.lookup("RATE")
	var perSecond float64
	rateOK := false
	if rateRaw != "" {
		if perSecond, rateOK = parseRate(rateRaw); !rateOK {
			r.bad(rateVar, rateRaw, `want requests a second ("2.5") or per unit ("30/m", "600/h", "10/s"), more than 0`, usedRate)
		}
	}
	if spacingOK && spacing > 0 && rateOK {
		r.bad(spacingVar, spacingRaw, "want it unset when a rate is set: a limit paces by one or the other", usedSpacing)
		spacingOK = false
	}
	// A pace of the environment's replaces the defaults'.
	revertPace := func(x *Limit) { x.Rate, x.MinSpacing, x.Window = base.Rate, base.MinSpacing, base.Window }
	switch {
	case rateOK:
		l.Rate, l.MinSpacing, l.Window = rate.Limit(perSecond), 0, 0
		set = append(set, envSetting{rateVar, rateRaw, revertPace, usedRate})
	case spacingOK && spacing > 0:
		l.Rate, l.MinSpacing, l.Window = 0, spacing, 0
		set = append(set, envSetting{spacingVar, spacingRaw, revertPace, usedSpacing})
	case spacingOK:
		l.MinSpacing = 0
		set = append(set, envSetting{spacingVar, spacingRaw, func(x *Limit) { x.MinSpacing = base.MinSpacing }, usedSpacing})
	}
	if v, s, n, ok := r.integer("BURST", 1, "a whole number of at least 1", usedBurst); ok {
		l.Burst = n
		set = append(set, envSetting{v, s, func(x *Limit) { x.Burst = base.Burst }, usedBurst})
	}
	if v, s, n, ok := r.integer("MAX_CONCURRENT", 0, "a whole number, 0 for no cap", usedConcurrent); ok {
		l.MaxConcurrent = n
		set = append(set, envSetting{v, s, func(x *Limit) { x.MaxConcurrent = base.MaxConcurrent }, usedConcurrent})
	}
	// What the environment set must fit the defaults' other fields (a
	// Store needs a Rate, a Reserve a larger Burst, a Window a Burst it
	// can hold). Settings fall back until the Limit validates: one that
	// alone makes it valid, else the first; at worst all, which leaves
	// the defaults, valid.
	for err := l.Validate(); err != nil; err = l.Validate() {
		pick := 0
		for i, st := range set {
			try := l
			st.revert(&try)
			if try.Validate() == nil {
				pick = i
				break
			}
		}
		st := set[pick]
		st.revert(&l)
		r.bad(st.v, st.s, "does not fit the other settings: "+oneLine(err), st.used)
		set = append(set[:pick], set[pick+1:]...)
	}
	return l
}

// usedInt writes n, or for zero what it stands for: def, the library's
// default, when there is one, else none.
func usedInt(n, def int, none string) string {
	switch {
	case n != 0:
		return strconv.Itoa(n)
	case def != 0:
		return strconv.Itoa(def) + " (the library default)"
	}
	return "0 (" + none + ")"
}

// usedDuration writes d, or for zero what it stands for: def, the
// library's default, when there is one, else none.
func usedDuration(d, def time.Duration, none string) string {
	switch {
	case d != 0:
		return d.String()
	case def != 0:
		return def.String() + " (the library default)"
	}
	return "0s (" + none + ")"
}

// parseRate reads "2.5", "30/m", "600/h" or "10/s" as requests a second.
func parseRate(s string) (float64, bool) {
	num, unit, hasUnit := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n <= 0 {
		return 0, false
	}
	if !hasUnit {
		return n, true
	}
	switch strings.ToLower(strings.TrimSpace(unit)) {
	case "s", "sec", "second":
	case "m", "min", "minute":
		n /= 60
	case "h", "hour":
		n /= 3600
	default:
		return 0, false
	}
	// A rate so small that it underflows to 0 would mean no bucket at all.
	return n, n > 0
}
