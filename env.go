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
// ("5000"). A variable not set, or set empty, leaves its field zero, which
// means the default.

// EnvFallback reports a variable the lenient readers did not use: its
// value was bad, or clashed with another's, and the default stands in.
type EnvFallback struct {
	Var, Value string
	Reason     string // what was wrong, and what is allowed
}

// PolicyFromEnv reads a RetryPolicy from the <prefix>_RETRY_* variables.
// Any bad value makes it return one error naming every bad variable, its
// value and what is allowed; the policy it returns then is the zero one.
// The policy it returns with a nil error passes Validate.
func PolicyFromEnv(prefix string) (RetryPolicy, error) {
	return fromEnv(prefix, (*envReader).policy)
}

// PolicyFromEnvLenient is PolicyFromEnv that never fails: a bad variable,
// or one that clashes with another (a max delay below the initial one),
// is left out, its default stands in, and fallback (when not nil) is told.
func PolicyFromEnvLenient(prefix string, fallback func(EnvFallback)) RetryPolicy {
	return fromEnvLenient(prefix, (*envReader).policy, fallback)
}

// LimitFromEnv reads a Limit from <prefix>_MIN_DELAY, _RATE, _BURST and
// _MAX_CONCURRENT, named prefix (lower case). Bad values make it return one
// error naming every bad variable; the Limit it returns with a nil error
// passes Validate.
func LimitFromEnv(prefix string) (Limit, error) {
	return fromEnv(prefix, (*envReader).limit)
}

// LimitFromEnvLenient is LimitFromEnv that never fails: a bad variable is
// left out, and fallback (when not nil) is told.
func LimitFromEnvLenient(prefix string, fallback func(EnvFallback)) Limit {
	return fromEnvLenient(prefix, (*envReader).limit, fallback)
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

// fromEnvLenient reads a value with read, leaving out bad variables and
// telling fallback of each.
func fromEnvLenient[T any](prefix string, read func(*envReader) T, fallback func(EnvFallback)) T {
	r := envReader{prefix: envPrefix(prefix), lenient: true}
	v := read(&r)
	r.report(fallback)
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
	lenient  bool
	problems []EnvFallback
}

// lookup returns the value of <prefix>name, "" when unset.
func (r *envReader) lookup(name string) (string, string) {
	v := r.prefix + name
	return v, strings.TrimSpace(os.Getenv(v))
}

func (r *envReader) bad(v, value, reason string) {
	r.problems = append(r.problems, EnvFallback{Var: v, Value: value, Reason: reason})
}

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

func (r *envReader) report(fallback func(EnvFallback)) {
	if fallback != nil {
		for _, p := range r.problems {
			fallback(p)
		}
	}
}

func (r *envReader) duration(name string) (time.Duration, string) {
	v, s := r.lookup(name)
	if s == "" {
		return 0, v
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		return time.Duration(ms) * time.Millisecond, v
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, v
	}
	r.bad(v, s, `want a duration such as "5s" or "1m30s", or whole milliseconds, not negative`)
	return 0, v
}

func (r *envReader) integer(name string, least int, allowed string) (int, string) {
	v, s := r.lookup(name)
	if s == "" {
		return 0, v
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		r.bad(v, s, "want "+allowed)
		return 0, v
	}
	return n, v
}

func (r *envReader) policy() RetryPolicy {
	var p RetryPolicy
	p.MaxAttempts, _ = r.integer("RETRY_MAX_ATTEMPTS", 1, "a whole number of attempts, at least 1")
	initial, initialVar := r.duration("RETRY_INITIAL_DELAY")
	maxDelay, maxVar := r.duration("RETRY_MAX_DELAY")
	total, totalVar := r.duration("RETRY_TOTAL_CAP")
	if v, s := r.lookup("RETRY_MULTIPLIER"); s != "" {
		m, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(m) || math.IsInf(m, 0) || m < 1 {
			r.bad(v, s, "want a finite number of at least 1")
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
			r.bad(v, s, "want full, proportional or none")
		}
	}
	// The delays must keep their order with the defaults standing in for
	// what is not set.
	effective := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	if maxDelay > 0 && effective(initial, DefaultInitialDelay) > maxDelay {
		r.bad(maxVar, maxDelay.String(), fmt.Sprintf("want at least the initial delay (%v)", effective(initial, DefaultInitialDelay)))
		maxDelay = 0
	}
	if total > 0 && effective(initial, DefaultInitialDelay) > total {
		r.bad(totalVar, total.String(), fmt.Sprintf("want at least the initial delay (%v)", effective(initial, DefaultInitialDelay)))
		total = 0
	}
	if initial > effective(maxDelay, DefaultMaxDelay) || initial > effective(total, DefaultTotalWaitCap) {
		r.bad(initialVar, initial.String(), fmt.Sprintf("want at most the max delay (%v) and the total cap (%v)",
			effective(maxDelay, DefaultMaxDelay), effective(total, DefaultTotalWaitCap)))
		initial = 0
	}
	p.InitialDelay, p.MaxDelay, p.TotalWaitCap = initial, maxDelay, total
	return p
}

func (r *envReader) limit() Limit {
	var l Limit
	spacing, spacingVar := r.duration("MIN_DELAY")
	if v, s := r.lookup("RATE"); s != "" {
		if perSecond, ok := parseRate(s); ok {
			l.Rate = rate.Limit(perSecond)
		} else {
			r.bad(v, s, `want requests a second ("2.5") or per unit ("30/m", "600/h", "10/s"), more than 0`)
		}
	}
	if spacing > 0 && l.Rate != 0 {
		r.bad(spacingVar, spacing.String(), "want it unset when a rate is set: a limit paces by one or the other")
		spacing = 0
	}
	l.MinSpacing = spacing
	l.Burst, _ = r.integer("BURST", 1, "a whole number of at least 1")
	l.MaxConcurrent, _ = r.integer("MAX_CONCURRENT", 0, "a whole number, 0 for no cap")
	l.Name = strings.ToLower(strings.TrimSuffix(r.prefix, "_"))
	return l
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
