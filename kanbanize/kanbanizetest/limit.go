package kanbanizetest

import (
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// buckets are the token buckets of one API key. A nil bucket is no limit.
type buckets struct {
	minute, hour *rate.Limiter
	// The windows the buckets refill in: a minute and an hour, divided by
	// the Config's TimeScale.
	minuteWindow, hourWindow time.Duration
}

func newBuckets(perMinute, perHour int, scale float64) *buckets {
	if scale <= 0 {
		scale = 1
	}
	b := buckets{minuteWindow: time.Duration(float64(time.Minute) / scale), hourWindow: time.Duration(float64(time.Hour) / scale)}
	if perMinute > 0 {
		b.minute = rate.NewLimiter(rate.Limit(float64(perMinute)/b.minuteWindow.Seconds()), perMinute)
	}
	if perHour > 0 {
		b.hour = rate.NewLimiter(rate.Limit(float64(perHour)/b.hourWindow.Seconds()), perHour)
	}
	return &b
}

// set changes the buckets to perMinute and perHour at now: each keeps the
// tokens it has, up to its new size; a bucket of a window that had no
// limit starts full, and one whose limit goes to zero goes.
func (b *buckets) set(perMinute, perHour int, now time.Time) {
	b.minute = resize(b.minute, perMinute, b.minuteWindow, now)
	b.hour = resize(b.hour, perHour, b.hourWindow, now)
}

func resize(lim *rate.Limiter, n int, window time.Duration, now time.Time) *rate.Limiter {
	switch {
	case n <= 0:
		return nil
	case lim == nil:
		return rate.NewLimiter(rate.Limit(float64(n)/window.Seconds()), n)
	}
	// The tokens over the new size go when the limiter next counts them.
	lim.SetLimitAt(now, rate.Limit(float64(n)/window.Seconds()))
	lim.SetBurstAt(now, n)
	return lim
}

// take takes a token from each bucket at now if every bucket has one, and
// otherwise takes none and returns how long until every bucket has one.
func (b *buckets) take(now time.Time) (ok bool, wait time.Duration) {
	if wait = b.until(now); wait > 0 {
		return false, wait
	}
	// Both have a token at now, so neither AllowN can fail.
	if b.minute != nil {
		b.minute.AllowN(now, 1)
	}
	if b.hour != nil {
		b.hour.AllowN(now, 1)
	}
	return true, 0
}

// until returns how long until every bucket has a token: the later of the
// two, 0 when both have one now.
func (b *buckets) until(now time.Time) time.Duration {
	return max(untilToken(b.minute, b.minuteWindow, now), untilToken(b.hour, b.hourWindow, now))
}

// untilToken returns how long until lim, which refills its burst in
// period, has a whole token.
func untilToken(lim *rate.Limiter, period time.Duration, now time.Time) time.Duration {
	if lim == nil {
		return 0
	}
	tokens := lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	// From the period rather than the rate, so that 30 a minute waits
	// exactly 2s per token, without a float's rounding pushing the
	// Retry-After to the next second.
	perToken := float64(period) / float64(lim.Burst())
	return time.Duration(math.Ceil((1 - tokens) * perToken))
}

// retryAfter returns the Retry-After value telling a client refused at now
// to come back after wait, or "" for none.
func retryAfter(mode RetryAfterMode, now time.Time, wait time.Duration) string {
	switch mode {
	case RetryAfterSeconds:
		return fakehttp.RetryAfterSeconds(wait)
	case RetryAfterHTTPDate:
		return fakehttp.RetryAfterDate(now, wait)
	}
	return ""
}
