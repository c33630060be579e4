package ratewisetest

import (
	"math"
	"math/bits"
	"time"
)

// This file holds the window models: FixedWindow, FixedWindowFromFirst
// and SlidingWindow. Their arithmetic is exact, in integer nanoseconds,
// so that a test can name the very nanosecond a request passes.

// fixedWindow is the state of FixedWindow and FixedWindowFromFirst. The
// zero state has seen no request.
type fixedWindow struct {
	limit     int
	window    time.Duration
	fromFirst bool      // windows open at a request, not on the clock
	end       time.Time // when the current window ends
	count     int       // requests admitted in the current window
}

func (w *fixedWindow) take(now time.Time) verdict {
	if !now.Before(w.end) {
		start := now
		if !w.fromFirst {
			_, into := windowOf(now, w.window)
			start = now.Add(-into)
		}
		w.end = start.Add(w.window)
		w.count = 0
	}
	v := verdict{reset: w.end.Sub(now)}
	if w.count < w.limit {
		w.count++
		v.admitted = true
	}
	v.remaining = w.limit - w.count
	if v.remaining == 0 {
		v.untilOne = v.reset
	}
	return v
}

// slidingWindow is the state of SlidingWindow. The zero state has seen no
// request.
type slidingWindow struct {
	limit  int
	window time.Duration
	index  int64 // the clock-aligned window that curr counts
	prev   int   // requests admitted in window index-1
	curr   int   // requests admitted in window index
}

func (s *slidingWindow) take(now time.Time) verdict {
	index, into := windowOf(now, s.window)
	switch index {
	case s.index:
	case s.index + 1:
		s.prev, s.curr = s.curr, 0
	default:
		s.prev, s.curr = 0, 0
	}
	s.index = index
	// left is the part of the window still to come, which is also the
	// part of the previous window still inside the last Window.
	left := s.window - into
	v := verdict{reset: left}
	if s.admits(left) {
		s.curr++
		v.admitted = true
	}
	// The weighted count is prev·left/Window + curr; another request
	// passes while it is below limit.
	v.remaining = max(s.limit-s.curr-int(mulDiv(uint64(s.prev), uint64(left), uint64(s.window))), 0)
	if v.remaining == 0 {
		v.untilOne = s.untilOne(left)
	}
	return v
}

// admits reports whether the weighted count, with left of the window to
// come, is below the limit: prev·left/Window + curr < limit.
func (s *slidingWindow) admits(left time.Duration) bool {
	if s.curr >= s.limit {
		return false
	}
	return productLess(uint64(s.prev), uint64(left), uint64(s.limit-s.curr), uint64(s.window))
}

// untilOne returns how long, with left of the window to come and no
// request admitted meanwhile, until the weighted count falls below the
// limit.
func (s *slidingWindow) untilOne(left time.Duration) time.Duration {
	if s.curr < s.limit && s.prev > 0 {
		// The count falls below the limit once prev·left' < (limit −
		// curr)·Window, that is once left' ≤ ⌈(limit − curr)·Window/prev⌉
		// − 1.
		most := ceilMulDiv(uint64(s.limit-s.curr), uint64(s.window), uint64(s.prev)) - 1
		if most >= left {
			return 0
		}
		if most > 0 {
			return left - most
		}
	}
	// In the next window prev becomes curr, and curr 0: the count is
	// curr·left'/Window, below the limit at once unless curr is the limit
	// itself, and then a nanosecond in.
	if s.curr < s.limit {
		return left
	}
	return left + 1
}

// windowOf returns the clock-aligned window of length w that now falls
// in, as its index k (it covers Unix time [k·w, (k+1)·w)), and how far
// into it now is.
func windowOf(now time.Time, w time.Duration) (int64, time.Duration) {
	ns := now.UnixNano()
	k, into := ns/int64(w), ns%int64(w)
	if into < 0 {
		k, into = k-1, into+int64(w)
	}
	return k, time.Duration(into)
}

// productLess reports whether a·b < c·d, exactly.
func productLess(a, b, c, d uint64) bool {
	hi1, lo1 := bits.Mul64(a, b)
	hi2, lo2 := bits.Mul64(c, d)
	return hi1 < hi2 || hi1 == hi2 && lo1 < lo2
}

// mulDiv returns ⌊a·b/c⌋ as a duration, saturating at the longest one.
func mulDiv(a, b, c uint64) time.Duration {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	return time.Duration(min(q, math.MaxInt64))
}

// ceilMulDiv returns ⌈a·b/c⌉ as a duration, saturating at the longest one.
func ceilMulDiv(a, b, c uint64) time.Duration {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, c)
	if q >= math.MaxInt64 {
		return math.MaxInt64
	}
	if r != 0 {
		q++
	}
	return time.Duration(q)
}

// saturatingMul returns n·d, saturating at the longest duration.
func saturatingMul(n int, d time.Duration) time.Duration {
	if n <= 0 || d <= 0 {
		return 0
	}
	if int64(d) > math.MaxInt64/int64(n) {
		return math.MaxInt64
	}
	return time.Duration(n) * d
}

// saturatingAdd returns a + b for durations of 0 or more, saturating at
// the longest duration.
func saturatingAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
