package ratewise

import (
	"math"
	"time"
)

// This file is the adaptive pacer's reading of a server that counts its
// quota in rate-limit headers: X-RateLimit-Limit/Remaining/Reset,
// RateLimit-Limit/Remaining/Reset, or the IETF draft RateLimit and
// RateLimit-Policy.
//
// The last count says how many requests the server will take now. The
// pacer sends no more than that, less those already on their way, plus
// what the server surely refills meanwhile. A short reset (under
// adaptiveQuotaWindow) is taken for a token bucket's: it refills at least
// (limit − remaining) / reset, and the counts themselves measure the
// refill, since between two counts the server refilled what it let
// through plus what the count grew, give or take one. A refusal shows
// that the first bound does not hold (a fixed window that empties before
// its reset, or other clients) and the pacer keeps only the measure. A
// long reset (an hourly quota, say) is a window: its remaining quota is
// spread evenly over the time left.

const (
	// adaptiveQuotaWindow is the shortest reset that makes a remaining
	// quota one to spread evenly: shorter resets are a bucket's refill.
	adaptiveQuotaWindow = time.Minute
	// countSampleEvery and countSamples keep the counts the refill is
	// measured over: one at most this often, this many, the oldest first.
	countSampleEvery = 250 * time.Millisecond
	countSamples     = 16
	// countSettle is how close together two counts must come for the
	// lower to be taken as the later, whatever their order.
	countSettle = 10 * time.Millisecond
)

// serverAnswer is what the answer to a request tells the pacer.
type serverAnswer struct {
	ok, refused bool
	remaining   int           // quota left, -1 when the answer does not say
	limit       int           // the full quota, 0 when it does not say
	reset       time.Duration // until the quota resets, when it says
}

// serverCount is the key's last count of the server's quota.
type serverCount struct {
	seq       uint64 // the request whose answer it is
	at        time.Time
	remaining int
	limit     int
	reset     time.Duration
	// window is set once a reset of adaptiveQuotaWindow or more has been
	// seen: the quota comes back at the reset, and is spread until then.
	window bool
	// noBound is set by a refusal: limit/reset is no refill to count on.
	noBound bool
	// reask is how long after a count of none left without a reset the
	// key asks again.
	reask time.Duration
	// consumed counts the successes since counting began; samples holds
	// earlier (at, consumed, remaining) to measure the refill over.
	consumed int64
	samples  []countSample
}

type countSample struct {
	at        time.Time
	consumed  int64
	remaining int
}

// counted takes in a count an answer carries, with a.mu held, and says
// whether the server counts its quota: then the count, not a learned
// pace, governs the key.
func (a *adaptiveState) counted(seq uint64, an serverAnswer, now time.Time) bool {
	c := a.count
	switch {
	case an.remaining < 0:
		if c != nil && an.ok {
			// Successes no longer carry a count: learn a pace again, from
			// a slow start.
			a.count, a.slowStart, a.window = nil, true, adaptiveStartWindow
		}
		return a.count != nil
	case c == nil:
		c = &serverCount{}
		a.count, a.slowStart = c, false
	}
	if an.ok {
		c.consumed++
	}
	if an.refused {
		// Whatever the count says (another limit may bind), nothing is
		// left now, and limit/reset is no refill to count on.
		c.noBound, an.remaining = true, 0
	}
	// The server may take requests sent together in any order, and their
	// answers may overtake each other: of counts that come close together,
	// or come for a request sent before the one counted, the lowest is the
	// latest.
	settled := now.Sub(c.at) >= countSettle
	if an.remaining > c.remaining && (!settled || seq < c.seq) {
		return true
	}
	c.seq = max(c.seq, seq)
	c.at, c.remaining, c.limit, c.reset = now, an.remaining, an.limit, an.reset
	switch {
	case an.remaining > 0:
		c.reask = 0
	case an.reset <= 0:
		// Nothing left and no reset said: ask again after a while, twice
		// as long each time the answer is the same.
		c.reask = min(max(2*c.reask, time.Second), adaptiveQuotaWindow)
	}
	c.window = c.window || an.reset >= adaptiveQuotaWindow
	if n := len(c.samples); n == 0 || now.Sub(c.samples[n-1].at) >= countSampleEvery {
		if n == countSamples {
			c.samples = append(c.samples[:0], c.samples[1:]...)
		}
		c.samples = append(c.samples, countSample{at: now, consumed: c.consumed, remaining: an.remaining})
	}
	return true
}

// wait is how long the head of the line waits at now for the count to
// allow a request, with a.mu held, and a channel closed at the next
// answer, which may allow it sooner: nil when none is on its way.
func (c *serverCount) wait(a *adaptiveState, now time.Time) (time.Duration, <-chan struct{}) {
	left := float64(c.remaining - a.inFlight)
	if a.inFlight > 0 {
		// Requests on their way may reach the server in another order
		// than sent, and a count may miss one: keep a token for that.
		left--
	}
	resetAt := c.at.Add(c.reset)
	if c.reset <= 0 {
		resetAt = c.at.Add(c.reask)
	}
	if c.window {
		switch {
		case !now.Before(resetAt):
			// The window has turned: one request learns the new count.
			if a.inFlight > 0 {
				return 0, a.answered()
			}
			return 0, nil
		case left < 1:
			return resetAt.Sub(now), c.nextAnswer(a)
		}
		// Spread what is left evenly over the time left.
		gap := time.Duration(float64(resetAt.Sub(now)) / left)
		if d := a.lastSend.Add(gap).Sub(now); d > 0 {
			return d, c.nextAnswer(a)
		}
		return 0, nil
	}
	refill := c.refill(now)
	credit := left + refill*now.Sub(c.at).Seconds()
	// By the reset the server has its quota back, however slowly it seems
	// to refill; a count without a reset is asked again after a while.
	untilReset := max(resetAt.Sub(now), adaptiveMinSample)
	switch {
	case credit >= 1:
		return 0, nil
	case !now.Before(resetAt) && a.inFlight == 0:
		return 0, nil // the count is out of date: one request learns the new one
	case refill > 0:
		d := time.Duration(math.Min((1-credit)/refill*float64(time.Second), float64(untilReset)))
		return max(d, 1), c.nextAnswer(a)
	case a.inFlight > 0:
		return 0, a.answered()
	}
	return untilReset, nil
}

// nextAnswer is a channel closed at the next answer, or nil when no
// request is on its way, with a.mu held.
func (c *serverCount) nextAnswer(a *adaptiveState) <-chan struct{} {
	if a.inFlight == 0 {
		return nil
	}
	return a.answered()
}

// refill is the least the server surely refills a second: the larger of
// limit/reset and the refill measured between counts.
func (c *serverCount) refill(now time.Time) float64 {
	var r float64
	if !c.noBound && c.limit > c.remaining && c.reset > 0 {
		r = float64(c.limit-c.remaining) / c.reset.Seconds()
	}
	if len(c.samples) > 0 {
		s := c.samples[0]
		if span := c.at.Sub(s.at).Seconds(); span >= adaptiveMinSample.Seconds() {
			// Let through plus grown, less the one a count may round off.
			measured := float64(c.consumed-s.consumed+int64(c.remaining-s.remaining)-1) / span
			r = math.Max(r, measured)
		}
	}
	return math.Min(r, 1e6)
}
