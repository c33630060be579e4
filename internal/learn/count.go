package learn

import (
	"math"
	"net/http"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
)

// This file is a Pacer's reading of a server that counts its
// quota in rate-limit headers: X-RateLimit-Limit/Remaining/Reset,
// RateLimit-Limit/Remaining/Reset, the IETF draft RateLimit and
// RateLimit-Policy, and the vendors' own forms.
//
// The last count says how many requests the server will take now: the
// pacer sends that many at once, less those already on their way, and
// then what the server surely refills meanwhile. Whether the quota comes
// back bit by bit (a token bucket) or all at once at its reset (a window)
// the counts themselves tell: between two counts of one window the server
// refilled what it let through plus what the count grew, give or take
// one. A bucket's refill is paced by; a window's quota is waited for
// until its reset, then sent at once, as a client that knows the window
// does best. Before the counts have measured anything, a bucket refills
// at least (limit − remaining) / reset; a refusal shows that bound wrong
// (a window, or other clients) and it is dropped.
//
// A reset given in whole seconds is rounded, so counts taken at several
// moments of one window are kept together: the earliest instant they say
// is the reset, which a count taken early in the window gives to the
// millisecond.

const (
	// countSampleEvery and countSamples keep the counts the refill is
	// measured over: one at most this often, this many, the oldest first.
	countSampleEvery = 250 * time.Millisecond
	countSamples     = 16
	// countSettle is how close together two counts must come for the
	// lower to be taken as the later, whatever their order.
	countSettle = 10 * time.Millisecond
	// countMaxReask bounds the wait before asking again when a count says
	// nothing is left and not when it comes back.
	countMaxReask = time.Minute
	// countEarlyStep is the first wait before asking again when a window
	// has not turned at the reset its count said, and countEarlyMax the
	// longest, doubling from one to the other.
	countEarlyStep = 50 * time.Millisecond
	countEarlyMax  = 200 * time.Millisecond
	// countMinShare and countShareRegain bound and restore the share of a
	// count a key takes when others take from it too.
	countMinShare    = 1.0 / 16
	countShareRegain = 1.02
	// windowMargin is how long past the whole seconds a reset cut to its
	// second rounds up to the window is taken to end, for a server that
	// counts its last instant in: the margin a told window keeps too.
	windowMargin = 5 * time.Millisecond
)

// Answer is what the answer to a request tells a Pacer: whether it was
// let through or refused for rate, and the count of the server's quota
// its headers carry. An answer without a count has Remaining -1: the
// zero Answer says that none is left, and that the request was sent
// alone.
type Answer struct {
	// OK is set for a success (2xx), Refused for a refusal for rate; an
	// answer that is neither (an error of another kind, or no response
	// at all) teaches only its count.
	OK, Refused bool
	Remaining   int           // quota left, -1 when the answer does not say
	Limit       int           // the full quota, 0 when it does not say
	Reset       time.Duration // until the quota resets, when it says
	// ResetDue is set when the answer says a reset that is already past:
	// a time cut to its second, whose quota is about to come back.
	ResetDue bool
	// Hint is a refusal's wait hint (Retry-After and the like), when it
	// has one the call honours.
	Hint time.Duration
	// Flight is how many of the key's requests were in flight when this
	// one was sent, it left out, for a request the Pacer did not pace;
	// -1 when unknown. A Pacer counts those it paces itself.
	Flight int
}

// ReadAnswer reads a response for a Pacer: its outcome, a refusal when
// refused says so, else a success when its status is 2xx, and the count
// of the server's quota its headers carry (see [headers.ReadCount]). It
// leaves Hint to the caller.
func ReadAnswer(resp *http.Response, refused bool, now time.Time) Answer {
	c := headers.ReadCount(resp.Header, now)
	return Answer{
		Flight:    -1,
		OK:        resp.StatusCode >= 200 && resp.StatusCode <= 299 && !refused,
		Refused:   refused,
		Remaining: c.Remaining,
		Limit:     c.Limit,
		Reset:     c.Reset,
		ResetDue:  c.ResetDue,
	}
}

// serverCount is the key's last count of the server's quota.
type serverCount struct {
	seq       uint64 // the request whose answer it is
	at        time.Time
	remaining int
	limit     int
	countReset
	// reask is how long after a count of none left without a reset the
	// key asks again.
	reask time.Duration
	// consumed counts the successes since counting began; samples holds
	// earlier (at, consumed, remaining) of this window to measure the
	// refill over.
	consumed int64
	samples  []countSample
	// onRefill marks, by seq modulo 64, the recent requests sent on the
	// refill's credit rather than on what the count said was left;
	// onRefillNow says whether the last wait let one go so.
	onRefill    uint64
	onRefillNow bool
	// share is the part of what the count says is left that the key
	// takes: less than all once a request the count let go was refused,
	// the quota taken meanwhile by other clients it shares with.
	share float64
	// period is a sliding window's length, once seen: the time between
	// two windows' resets.
	period time.Duration
	// unseen counts the requests the key did not pace (its slow start's,
	// sent before it armed) let through since the count was taken: their
	// answers are not all read for a count, and each took from what it
	// says is left.
	unseen int
}

// markSent notes how request seq was let go, with p.mu held.
func (c *serverCount) markSent(seq uint64) {
	bit := uint64(1) << (seq % 64)
	if c.onRefillNow {
		c.onRefill |= bit
	} else {
		c.onRefill &^= bit
	}
}

// sentOnRefill reports whether request seq, among the last 64 sent, was
// let go on the refill's credit.
func (c *serverCount) sentOnRefill(seq uint64) bool {
	return seq > 0 && c.onRefill&(uint64(1)<<(seq%64)) != 0
}

// countReset is what a count of the server's quota says of when the
// quota comes back, as a key's serverCount and the fleet's sharedCount
// keep it.
type countReset struct {
	// reset is what the last count said of its reset, and resetAt when the
	// server says its quota comes back: for a window, the earliest
	// instant the counts of this window say; zero when they do not say.
	reset   time.Duration
	resetAt time.Time
	// refills is set once the count has grown before its reset: the
	// server refills bit by bit (a bucket), not at once (a window).
	refills bool
	// retryAt is when the last refusal the count explains asked the client
	// to come back: when the count has nothing left, one request asks
	// then, if its reset is later or past.
	retryAt time.Time
	// early is the wait before asking again when a window has not turned
	// at the reset its count said, doubling each time: the reset was cut
	// to its second (cut). Such a window is opened by the first request
	// after it turned, at opened, and ends a whole number of seconds on.
	early  time.Duration
	cut    bool
	opened time.Time
	// noBound is set by a refusal: limit/reset is no refill to count on.
	noBound bool
}

// turned reports whether a count at now saying reset is a new window's:
// its reset is a window, a second at least, on from the one held.
func (r *countReset) turned(reset time.Duration, now time.Time) bool {
	return reset > 0 && !r.resetAt.IsZero() && now.Add(reset).Sub(r.resetAt) >= time.Second
}

// refusedAtReset takes in an answer at now whose count explained says
// explains its refusal (none left), the reset of whose own count was due
// (resetDue), with its wait hint. It reports whether the reset the counts
// said has come, the quota to be back whole (resetPassed), and whether
// the answer was refused past it (pastReset), and then was cut to its
// second, so that the key asks again soon (earlyAsk).
func (r *countReset) refusedAtReset(explained, resetDue bool, hint time.Duration, now time.Time) (resetPassed, pastReset, earlyAsk bool) {
	resetPassed = !r.refills && !r.resetAt.IsZero() && !now.Before(r.resetAt)
	pastReset = explained && resetPassed
	// A refusal whose own reset is already past says the window is about
	// to turn, whatever its hint: the reset was cut to its second.
	earlyAsk = explained && resetDue || pastReset && hint <= 0
	switch {
	case earlyAsk:
		// Refused after the reset, with no word of when to come back or
		// with a reset already past: the reset was rounded down (a Unix
		// time cut to its second). Ask again soon, a little later each
		// time.
		r.early = min(max(2*r.early, countEarlyStep), countEarlyMax)
		r.retryAt, r.cut = now.Add(r.early), true
	case pastReset:
		// Refused after the reset the counts said, and told to wait: the
		// quota does not come back at once (a sliding window), but bit by
		// bit. Let limit/reset say how fast, until it fails too.
		r.refills, r.noBound = true, false
	}
	return resetPassed, pastReset, earlyAsk
}

// countSample is an earlier count the refill is measured from, a
// Pacer's or a fleet's: taken at at, when the key had consumed so much of
// the quota, with remaining left.
type countSample struct {
	at        time.Time
	consumed  int64
	remaining int
}

// counted takes in a count an answer carries, with p.mu held, and reports
// whether the count explains the answer's refusal: it says nothing was
// left. A refusal while the count says there was quota comes from some
// other limit, which the learned pace answers.
func (p *Pacer) counted(seq uint64, an Answer, now time.Time) (explained bool) {
	c := p.count
	switch {
	case an.Remaining < 0:
		if c != nil && an.OK {
			p.count = nil // successes no longer carry a count
		}
		return false
	case c == nil:
		c = &serverCount{share: 1}
		p.count = c
	}
	if an.OK {
		c.consumed++
	}
	explained = an.Refused && an.Remaining == 0
	resetPassed, _, earlyAsk := c.refusedAtReset(explained, an.ResetDue, an.Hint, now)
	switch {
	case an.Refused && c.sentOnRefill(seq):
		// A request sent on the refill limit/reset promised was refused:
		// it is no refill to count on (a window, or other clients).
		c.noBound = true
	case explained && seq > 0 && !earlyAsk:
		// A request the count let go, refused for none left: others took
		// the quota meanwhile. Take half as much of what is left; a
		// success on the count wins a little back. (One that asked past
		// the reset only found the window had not turned yet, its reset
		// cut short.)
		c.share = max(c.share/2, countMinShare)
	case an.OK && seq > 0:
		c.share = min(c.share*countShareRegain, 1)
	}
	// The server may take requests sent together in any order, and their
	// answers may overtake each other: of counts that come close together,
	// or come for a request sent before the one counted, the lowest is the
	// latest, unless its reset is a window on from the one held (turned).
	settled := now.Sub(c.at) >= countSettle || c.turned(an.Reset, now)
	if an.Remaining > c.remaining && (!settled || seq < c.seq) {
		return explained
	}
	if an.OK && resetPassed && an.Reset > 0 && now.Add(an.Reset).Sub(c.resetAt) >= time.Second &&
		an.Remaining*2 < an.Limit {
		// The window turned (its reset moved on a window's length) and
		// gave back less than half its quota: a sliding window, whose
		// quota comes back bit by bit as the last window's requests age
		// out, its limit a window.
		c.refills, c.noBound, c.early = true, false, 0
		c.period = now.Add(an.Reset).Sub(c.resetAt).Round(time.Second)
		c.samples = c.samples[:0]
	}
	if grew := !c.at.IsZero() && an.Remaining > c.remaining; grew && !c.refills {
		if c.resetAt.IsZero() || now.Before(c.resetAt) {
			c.refills = true // grown before the reset: a bucket
		} else {
			// A window turned: what came back at once is no refill to
			// measure, and the next reset is another instant.
			c.samples, c.resetAt, c.early, c.retryAt = c.samples[:0], time.Time{}, 0, time.Time{}
			if c.cut {
				c.opened = now
			}
		}
	}
	c.seq = max(c.seq, seq)
	c.at, c.remaining, c.limit, c.reset = now, an.Remaining, an.Limit, an.Reset
	c.unseen = 0
	c.noteReset(an.Reset, now)
	if an.ResetDue {
		// Due now: a window, whose turn the next counts show. (c.reset
		// stays 0: limit/reset says no refill.)
		c.noteReset(time.Nanosecond, now)
	}
	switch {
	case an.Remaining > 0:
		c.reask = 0
	case an.Reset <= 0 && an.Hint <= 0:
		// Nothing left and no reset said: ask again after a while, twice
		// as long each time the answer is the same.
		c.reask = min(max(2*c.reask, time.Second), countMaxReask)
	}
	if explained && an.Hint > 0 && !earlyAsk {
		c.retryAt = now.Add(an.Hint)
	}
	if n := len(c.samples); n == 0 || now.Sub(c.samples[n-1].at) >= countSampleEvery {
		if n == countSamples {
			c.samples = append(c.samples[:0], c.samples[1:]...)
		}
		c.samples = append(c.samples, countSample{at: now, consumed: c.consumed, remaining: an.Remaining})
	}
	return explained
}

// noteReset takes in a count's reset, which says reset from now. Of the
// instants the counts of one window say, the earliest is kept: rounding
// only delays them. A reset that says an instant a second or more past
// the one kept is another window's, and a bucket's time to fill moves on
// with every count: they replace it.
func (r *countReset) noteReset(reset time.Duration, now time.Time) {
	if reset <= 0 {
		return
	}
	at := now.Add(reset)
	if r.refills || r.resetAt.IsZero() || at.Before(r.resetAt) || at.Sub(r.resetAt) >= time.Second {
		r.resetAt = at
	}
}

// quotaBackAt is when a count of none left, taken at at, says the quota
// comes back: at its reset, or, without one, after reask; a reset cut to
// its second, of a window opened at opened, ends the whole seconds it
// rounds up to after that (and a margin, for a server that counts its
// last instant in); a refusal's hint that ends sooner (retryAt), or an
// early ask (early) once the reset passed, says when to ask.
func quotaBackAt(resetAt, at time.Time, reask time.Duration, opened, retryAt time.Time, early time.Duration, now time.Time) time.Time {
	backAt := resetAt
	switch {
	case backAt.IsZero():
		backAt = at.Add(max(reask, adaptiveMinSample))
	case !opened.IsZero() && backAt.After(opened):
		secs := math.Ceil(backAt.Sub(opened).Seconds())
		backAt = opened.Add(time.Duration(secs)*time.Second + windowMargin)
	}
	if !retryAt.IsZero() && (retryAt.Before(backAt) || early > 0 && !now.Before(backAt)) {
		backAt = retryAt
	}
	return backAt
}

// wait is how long the head of the line waits at now for the count to
// allow a request, with p.mu held, and a channel closed at the next
// answer, which may allow it sooner: nil when none is on its way.
func (c *serverCount) wait(p *Pacer, now time.Time) (time.Duration, <-chan struct{}) {
	// On their way are the key's paced requests and those of its slow
	// start, sent before it armed: each takes from what is left.
	onWay := p.inFlight + p.untrackedOut
	left := math.Floor(float64(c.remaining)*c.share) - float64(onWay+c.unseen)
	if onWay > 0 {
		// Requests on their way may reach the server in another order
		// than sent, and a count may miss one: keep a token for that.
		left--
	}
	refill := c.refill()
	credit := left + refill*now.Sub(c.at).Seconds()
	if credit >= 1 {
		c.onRefillNow = left < 1
		return 0, nil
	}
	c.onRefillNow = false
	if c.refills && refill > 0 {
		// A bucket, or a sliding window: what is left comes back bit by
		// bit, and its reset says nothing of when the next one does.
		d := time.Duration((1 - credit) / refill * float64(time.Second))
		return max(d, 1), c.nextAnswer(p)
	}
	// Nothing left now. The quota comes back at the reset, or, without
	// one, is asked for again after a while; a refusal's hint that ends
	// sooner says when to ask.
	backAt := quotaBackAt(c.resetAt, c.at, c.reask, c.opened, c.retryAt, c.early, now)
	if !now.Before(backAt) {
		// The count is out of date: one request learns the new one.
		if p.inFlight > 0 {
			return 0, p.answered()
		}
		return 0, nil
	}
	d := backAt.Sub(now)
	if refill > 0 {
		// A bucket refills before its reset.
		d = time.Duration(math.Min((1-credit)/refill*float64(time.Second), float64(d)))
	}
	return max(d, 1), c.nextAnswer(p)
}

// nextAnswer is a channel closed at the next answer, or nil when no
// request is on its way, with p.mu held.
func (c *serverCount) nextAnswer(p *Pacer) <-chan struct{} {
	if p.inFlight+p.untrackedOut == 0 {
		return nil
	}
	return p.answered()
}

// refill is the least the server surely refills a second: the larger of
// limit/reset and the refill measured between the counts of this window.
func (c *serverCount) refill() float64 {
	var r float64
	switch {
	case c.noBound:
	case c.period > 0:
		r = float64(c.limit) / c.period.Seconds()
	case c.limit > c.remaining && c.reset > 0:
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
