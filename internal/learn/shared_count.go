package learn

import (
	"math"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is a fleet's count of its server's quota, as a store keeps
// it: what a Pacer's count (count.go) is to one transport. A count any
// replica reads is what every replica takes from: the turns the fleet
// took since the counted request went consume it. As for a Pacer, a
// window's quota is waited for until its reset, then taken at once, and
// a reset cut to its second is learned from the instant a window opened;
// a count that grows before its reset is a bucket's, which refills at
// least limit/reset, or what the counts measure: the answers let through and the
// count grown since an earlier count of this window. A share of a quota
// other clients take from, which a Pacer keeps, a fleet does without: it
// is one client.

// sharedCount is the fields of a Shared's count, zero until an answer
// carried one.
type sharedCount struct {
	counted bool
	// remaining is the last count, of limit, taken by turn cseq (0 for
	// a request not paced), told at at, when the fleet had taken turns up
	// to told; turns after cseq consume it.
	remaining, limit int
	cseq, told       uint64
	at               time.Time
	// sawTurn is set once the counts saw a window turn: before is then
	// the last turn before the first of the counted window's, and
	// refusedBefore the refusals told by then (see order).
	sawTurn       bool
	before        uint64
	refusedBefore int64
	// refusalCounted is set when the count explained the last refusal
	// told: it said nothing was left, and says when it comes back, which
	// the refusal's hint does not say better (as a Pacer's).
	refusalCounted bool
	countReset     // when the quota comes back, as a Pacer's count keeps it
	// reask is how long after a count of none left without a reset the
	// key asks again.
	reask time.Duration
	// period is a sliding window's length, once seen: the time between
	// two windows' resets; limit a period is its refill.
	period time.Duration
	// askSeq is the turn that asks for the new count once the old one is
	// out of date, holding the others until askUntil.
	askSeq   uint64
	askUntil time.Time
	// refusals counts the refusals told with a count; sample, an earlier
	// count of this window, is what the refill is measured over: the
	// turns since, less those refused, passed (consumed, as a Pacer's
	// count keeps it: turns less refusals). newer is a count half a
	// countSampleSpan younger, which replaces it once it is that old, so
	// that the measure always spans half of one at least (a Pacer keeps
	// countSamples).
	refusals      int64
	sample, newer countSample
}

// consumed is what the fleet's turns up to seq took of the quota: those
// not refused, of the ones whose outcome was told.
func (c *sharedCount) consumed(seq uint64) int64 { return int64(seq) - c.refusals }

// countSampleSpan is how old the count the refill is measured from grows
// before a later one replaces it: a Pacer keeps counts over as long.
const countSampleSpan = countSamples * countSampleEvery

// counted takes in the count an outcome carries, and reports whether it
// explains a refusal: it said nothing was left.
func (s *Shared) counted(o store.Outcome, now time.Time) (explained bool) {
	c := &s.count
	refused := o.Kind == store.Refused
	if !o.Counted {
		if c.counted && (o.Kind == store.Passed || o.Kind == store.Answered) {
			s.count = sharedCount{} // successes no longer carry a count
		}
		if refused {
			c.refusalCounted = false
		}
		return false
	}
	if !c.counted {
		s.count = sharedCount{counted: true, remaining: o.Remaining, cseq: o.Seq, at: now, told: s.seq}
	}
	if o.Seq != 0 && o.Seq == c.askSeq {
		c.askSeq = 0 // the new count came
	}
	if refused {
		c.refusals++
	}
	explained = refused && o.Remaining == 0
	if refused {
		c.refusalCounted = explained
	}
	resetPassed, pastReset, earlyAsk := c.refusedAtReset(explained, o.ResetDue, o.Hint, now)
	if refused && !earlyAsk && !pastReset && o.Seq > c.told && int(o.Seq-c.cseq) > c.remaining {
		// A turn taken on the refill limit/reset promised, beyond what
		// the count said was left, was refused: it is no refill to count
		// on (a window, or other clients). A turn already on its way when
		// the count was told was taken on no promise of it: read as one,
		// a bucket was taken for a window of its burst a second
		// (throttled's GCRA held to 10 a second against 50).
		c.noBound = true
	}
	// A count of a turn taken before the one counted is older news;
	// of counts that come close together, or not paced (whose order is
	// not known: replicas tell them late), or of turns already on their
	// way when the one held was told (sent together, they reached the
	// server in any order, and a replica tells its count with its next
	// ask, late), the lowest is the latest, unless its reset is a window
	// on from the one held: the window turned, and the count is the new
	// window's (the old one's lowest, taken for the new window's first,
	// reads as a sliding window's). Read as a refill, a higher count of
	// a turn sent with the one counted made a window a bucket.
	turned := c.turned(o.Reset, now)
	settled := now.Sub(c.at) >= countSettle || turned
	if o.Seq != 0 && o.Seq < c.cseq ||
		o.Remaining > c.remaining && (!settled || o.Seq == 0 || o.Seq <= c.told && !turned) {
		return explained
	}
	remaining := o.Remaining
	if !refused && resetPassed && o.Reset > 0 && now.Add(o.Reset).Sub(c.resetAt) >= time.Second && o.Remaining*2 < o.Limit {
		// The window turned (its reset moved on a window's length) and
		// gave back less than half its quota: a sliding window, or a
		// bucket whose reset says its limit's period, which refills bit
		// by bit, its limit a period.
		c.refills, c.noBound, c.early = true, false, 0
		c.period = now.Add(o.Reset).Sub(c.resetAt).Round(time.Second)
		c.sample, c.newer = countSample{}, countSample{}
	}
	if grew := remaining > c.remaining; grew && !c.refills {
		if c.resetAt.IsZero() || now.Before(c.resetAt) {
			c.refills = true // grown before the reset: a bucket
		} else {
			// A window turned: the next reset is another instant, and
			// what came back at once is no refill to measure.
			c.resetAt, c.early, c.retryAt = time.Time{}, 0, time.Time{}
			c.sample, c.newer = countSample{}, countSample{}
			if c.cut {
				c.opened = now
			}
			c.sawTurn, c.before, c.refusedBefore = true, s.seq, c.refusals
			if o.Seq != 0 {
				c.before = o.Seq - 1
			}
		}
	}
	last := countSample{at: c.at, consumed: c.consumed(c.cseq), remaining: c.remaining}
	switch age := now.Sub(c.sample.at); {
	case c.sample.at.IsZero():
		c.sample, c.newer = countSample{at: now, consumed: c.consumed(max(c.cseq, o.Seq)), remaining: remaining}, countSample{}
	case age >= countSampleSpan && !c.newer.at.IsZero():
		c.sample, c.newer = c.newer, last
	case age >= countSampleSpan/2 && c.newer.at.IsZero():
		c.newer = last
	}
	c.cseq = max(c.cseq, o.Seq)
	if o.Seq == 0 {
		c.cseq = s.seq // a request not paced: every turn since is not in it
	}
	c.at, c.told, c.remaining, c.limit, c.reset = now, s.seq, remaining, o.Limit, o.Reset
	c.noteReset(o.Reset, now)
	if o.ResetDue {
		c.noteReset(time.Nanosecond, now)
	}
	switch {
	case remaining > 0:
		c.reask = 0
	case o.Reset <= 0 && o.Hint <= 0:
		c.reask = min(max(2*c.reask, time.Second), countMaxReask)
	}
	if explained && o.Hint > 0 && !earlyAsk && c.opened.IsZero() {
		// (A hint of a reset known cut to its second is cut too: the
		// instant the window opened says when it ends.)
		c.retryAt = now.Add(o.Hint)
	}
	return explained
}

// refill is the least the server surely refills a second: limit/reset,
// unless a refusal showed it no bound, or what the counts measured since
// the sample, if more: the answers let through and the count grown, less the one
// a count may round off.
func (c *sharedCount) refill() float64 {
	var r float64
	switch {
	case c.noBound:
	case c.period > 0:
		r = float64(c.limit) / c.period.Seconds()
	case c.limit > c.remaining && c.reset > 0:
		r = float64(c.limit-c.remaining) / c.reset.Seconds()
	}
	if span := c.at.Sub(c.sample.at).Seconds(); !c.sample.at.IsZero() && span >= adaptiveMinSample.Seconds() {
		passed := c.consumed(c.cseq) - c.sample.consumed
		measured := float64(passed+int64(c.remaining-c.sample.remaining)-1) / span
		r = math.Max(r, measured)
	}
	return math.Min(r, 1e6)
}

// order corrects what is left of a window's count for the order its
// turns reached the server in, which is not the order they were taken
// in when they were sent together: the count of turn cseq saw limit −
// remaining requests of the window, and when the fleet's turns of the
// window up to cseq (less those refused) are fewer, it saw that many of
// the later turns too, up to seq; when they are more, that many of them
// were still on their way, and take from what it says is left. (The
// fleet is one client, as for the rest of the count. The window must be
// one whose first turn the counts saw: the first window's quota went to
// requests before the key was paced, too. A bucket's count, which
// refills, says nothing of it, nor one whose window turned unseen.)
func (c *sharedCount) order(seq uint64) int {
	if !c.sawTurn || c.refills || c.limit <= 0 || c.cseq < c.before || seq < c.cseq {
		return 0
	}
	seen := c.limit - c.remaining
	ours := int(c.cseq-c.before) - int(c.refusals-c.refusedBefore)
	if ours > c.limit {
		// More of the fleet's turns let through since the window began
		// than it holds: the count is of a later window, whose turn no
		// count showed (a bucket's, say, whose reset never passes), and
		// says nothing of the order of this one's.
		return 0
	}
	if seen > ours {
		return min(seen-ours, int(seq-c.cseq))
	}
	return seen - ours
}

// countWait is how long the next turn waits at now for the count to
// allow it: 0 when it allows one now. ask is set when the count is out of
// date and this turn is the one that learns the new one.
func (s *Shared) countWait(now time.Time) (wait time.Duration, ask bool) {
	c := &s.count
	left := float64(c.remaining) - float64(s.seq-c.cseq) + float64(c.order(s.seq))
	refill := c.refill()
	credit := left + refill*now.Sub(c.at).Seconds()
	if credit >= 1 {
		return 0, false
	}
	if c.refills && refill > 0 {
		return max(time.Duration((1-credit)/refill*float64(time.Second)), 1), false
	}
	backAt := quotaBackAt(c.resetAt, c.at, c.reask, c.opened, c.retryAt, c.early, now)
	if !now.Before(backAt) {
		// The count is out of date: one turn learns the new one.
		if c.askSeq != 0 && now.Before(c.askUntil) {
			return min(sharedAskPoll, c.askUntil.Sub(now)), false
		}
		return 0, true
	}
	d := backAt.Sub(now)
	if refill > 0 {
		d = time.Duration(math.Min((1-credit)/refill*float64(time.Second), float64(d)))
	}
	return max(d, 1), false
}
