package learn

import (
	"math"
	"sync"
	"time"
)

// This file is the pace a Pacer learns of a key's server from refusals.
//
// Where the server counts its quota in rate-limit headers, the count
// governs (count.go). Where only refusals tell the story, the
// server is taken for a token bucket: a refill rate R and a burst. A
// refusal says the bucket was empty at that moment. Between two refusals
// at t1 and t2, the successes S the server let through are what it
// refilled, R·(t2−t1), give or take the one token it may have held. So
// S/(t2−t1) measures R within 1/(t2−t1), without being told anything. The
// pacer sends at the low end of that measure, which the server can always
// serve, climbs to the high end as requests succeed, then probes beyond
// by a band that doubles with each second of successes, and measures
// again the next time the bucket runs dry: each measure spans longer, so
// each is closer.
//
// Before that, a key sends unpaced: it has learned nothing until its
// first rate-limit signal. Its first refusal starts the search: the pace
// starts high, halves at each refusal that comes too soon to measure, and
// doubles with each span of successes, until two refusals far enough
// apart measure the server. A refusal of a request
// sent before the last decrease is a sibling of the event that caused it,
// and does not decrease the pace again. After a long pause (a cooldown of
// more than a second, or a breaker that closes again) the pace resumes at
// half and climbs back.

// Tuning of the learned pace.
const (
	// adaptiveProbeStart is where the search for a pace starts, from the
	// first refusal of a key that learned nothing before it. Each halving
	// costs a refusal (several, when other clients share the server), and
	// each doubling one success, a few milliseconds at a fast server's
	// rate: a start a little below most APIs' rates finds them soonest.
	adaptiveProbeStart = 25
	// adaptiveMinSample is the shortest span between two empty buckets
	// worth a measure; shorter ones hold more error than signal.
	adaptiveMinSample = 100 * time.Millisecond
	// adaptiveProbeGrowth doubles the rate with each such span of
	// succeeding, while no measure has been made yet, so that the next
	// refusal comes soon.
	adaptiveProbeGrowth = 100 * time.Millisecond
	// adaptiveRamp is how long, succeeding, the rate takes to climb from
	// the low end of a measure to its high end.
	adaptiveRamp = time.Second
	// adaptiveMaxCredit bounds the time one success counts as succeeding:
	// the gap since the previous one, but no more than two intervals of
	// the pace, and never more than this. An idle key does not climb.
	adaptiveMaxCredit = time.Second
	// adaptiveMinBand is the least uncertainty a measure is given, as a
	// share of its rate: beyond the measure the pace grows by the band,
	// doubling each adaptiveRamp of successes, which finds a server that
	// has raised its limit, or a measure that was short and low.
	adaptiveMinBand = 0.02
	// adaptiveCut is the multiplicative decrease when a refusal comes too
	// soon after the last to measure anything.
	adaptiveCut = 0.7
	// adaptiveResume is where a pace resumes after a long pause, as a
	// share of what it was.
	adaptiveResume = 0.5
	// adaptiveMaxHold bounds how long the pace holds at the top of a
	// measure before probing beyond it, and adaptiveProbeAfter is how
	// many requests it lets through there first, at least: a probe costs
	// a refusal, which then comes once in so many requests at most.
	adaptiveMaxHold    = 30 * time.Second
	adaptiveProbeAfter = 100
	// adaptiveMaxRate bounds every pace, so that a long run of successes
	// cannot probe it to infinity; adaptiveMinRate is the slowest a pace
	// goes, one request a minute.
	adaptiveMaxRate = 1e6
	adaptiveMinRate = 1.0 / 60
)

// Pacer is what an adaptive scope has learned of one key's server, and
// the line the key's requests wait in for their turn. Make one with New;
// the zero value is not usable. A Pacer is safe for concurrent use: its
// methods take its lock, and those that wait hand back a delay or a
// channel for the caller to wait on, with the lock released.
type Pacer struct {
	mu      sync.Mutex
	ceiling float64                          // the Limit's Rate, or +Inf
	told    float64                          // the pace of the told limits the key goes under, or +Inf
	trace   func(format string, args ...any) // SetTrace's; nil traces nothing

	head     chan struct{} // holds a token while no request is at the head of the line
	queued   int           // requests in the line, the head included
	inFlight int           // requests sent and not answered
	changed  chan struct{} // closed, and replaced, when a request is answered and watched is set
	watched  bool          // changed was handed to a waiter
	sent     uint64        // requests sent so far: each is numbered
	cutAt    uint64        // sent at the last decrease; refusals up to it are siblings
	next     time.Time     // when the next request may start
	lastSend time.Time
	resumeAt time.Time // a long pause ends: resume at half pace

	// count is what the server says of its quota, nil until it says it.
	count *serverCount
	// win is what refusals taught of a server that gives its quota back
	// all at once, nil unless the key is windowed. notWindowed is set once
	// a window gave less than two requests: a slow bucket, or a sliding
	// window whose hints overstate the wait. dryTarget is the earliest
	// instant the hints of the refusals since the last success said to
	// come back.
	win         *learnedWindow
	notWindowed bool
	dryTarget   time.Time
	// sentBeforeRefusal is how many requests the transport sent before
	// the first it saw refused, of those sent before the key learned
	// anything: the quota of a window that ran out then, when the
	// transport calls this one server.
	sentBeforeRefusal int64
	// seedQuota and seedSpan are what the last window let through and
	// how long it held the key, once it turned out no window.
	seedQuota int
	seedSpan  time.Duration
	// untrackedOK counts the successes of requests the key did not pace
	// (Adopt, Unpaced): what the first window let through; untrackedOut,
	// those still in flight.
	untrackedOK  int
	untrackedOut int
	// dry counts the refusals since the last success, the first of them
	// at dryFrom: a streak long enough says the server refills nothing.
	// dryShown is the rate the server let requests through at before the
	// streak (refillShown), 0 when unknown: a bucket that refills at it
	// is not dry for several of its intervals.
	dry      int
	dryFrom  time.Time
	dryShown float64
	// lastTarget is when the last refusal's hint said to come back, zero
	// without one, and dryAnchor that of the refusal before the streak
	// (see earlierTurn).
	lastTarget, dryAnchor time.Time
	// successesAtRefusal is successes at the key's last refusal of any
	// kind; okRunBefore is the last run of successes a refusal ended, and
	// dryPassed the one before the streak.
	successesAtRefusal, okRunBefore, dryPassed int64

	// sentWith is how each of the last requests was sent, by its number
	// (see sentAs).
	sentWith [64]sending
	// blinds are the first and the last requests sent at a learned pace
	// answered, with their outcome (see blind.go). Refusals proved blind
	// to the pace leave the key unpaced while blindHold holds.
	blinds    Samples
	blindHold Hold
	// flights counts the answers by how many of the key's requests were
	// in flight when each was sent. flightCap is the cap on the key's
	// requests in flight the server showed, 0 for none; capProbing is set
	// while one more is tried, capFull counts the successes with the cap
	// full since, and capGrow is how many of them, per request of the
	// cap, come before the next try; capStrayAt is sent at the last
	// refusal taken for a stray (see cap.go).
	flights    flights
	flightCap  int
	capProbing bool
	capFull    int
	capGrow    int
	capStrayAt uint64
	// capDoubted is set while a cap the first refusals showed is not told
	// apart from a bucket's burst, which refuses a first wave alike: the
	// search's pace holds beside the cap until its tellers, capTellers
	// requests let go at once from capTellFrom on, are answered;
	// capTellOK counts those let through (see capDoubt). capRefutedAt is
	// sent when tellers showed a cap was none: the refusals of requests
	// sent before then show no cap again.
	capDoubted   bool
	capTellFrom  uint64
	capTellOK    int
	capRefutedAt uint64
	// capTellBy is when the hint of the refusal that showed the cap in
	// doubt ended, zero without one: tellers sent later tell nothing
	// (tellersLate).
	capTellBy time.Time
	// refusalCounted is set when the count explained the last refusal:
	// it said nothing was left.
	refusalCounted bool

	// retired is set once Retire ended the pace: another paces the key;
	// retiring, made by Retirable, is closed then, for a head of the line
	// that waits for its place.
	retired  bool
	retiring chan struct{}

	// unpaced is set until the first refusal: nothing learned yet.
	unpaced bool
	// freshOK counts the successes since the key last started learning:
	// since its first request, or since it went blind. shed is a
	// refusal's trial (see shed.go).
	freshOK int
	shed    Trial

	// The pace between two refusals (see ramp.go).
	ramp
	lastSuccess      time.Time
	successes        int64
	lastEmpty        time.Time // the last refusal that decreased or measured
	slack            bool      // since then, the pace has not been binding at some point
	successesAtEmpty int64
	firstSend        time.Time
}

// New returns a Pacer that paces at start requests a second, never
// faster than ceiling (+Inf for no ceiling). A start of 0 or +Inf leaves
// the key unpaced, up to the ceiling, until its first refusal; a count of
// the server's quota governs meanwhile. now is when the key's first
// request went, zero when it goes later; it only dates what a trace (SetTrace) sees.
func New(start, ceiling float64, now time.Time) *Pacer {
	p := &Pacer{ceiling: ceiling, told: math.Inf(1), changed: make(chan struct{}), head: make(chan struct{}, 1), firstSend: now}
	p.head <- struct{}{}
	if start > 0 && !math.IsInf(start, 1) {
		p.setPace(start, start, 0, 0, p.top())
	} else {
		p.unpaced = true
	}
	return p
}

// rate is the learned pace at now, in requests a second; +Inf while
// unpaced.
func (p *Pacer) rate(now time.Time) float64 {
	if p.unpaced {
		return p.ceiling
	}
	return math.Min(p.climbed(), math.Min(p.top(), adaptiveMaxRate))
}

// top is the fastest the pace may go once paced: the ceiling, or the
// told limit's pace when a refusal under it armed the key.
func (p *Pacer) top() float64 { return math.Min(p.ceiling, p.told) }

// interval is the time between two requests at r a second.
func interval(r float64) time.Duration {
	if r <= 0 {
		return time.Hour
	}
	return time.Duration(math.Min(float64(time.Second)/r, float64(time.Hour)))
}

// resume ends a long pause that is over, with p.mu held: a server that
// just recovered gets half the pace, climbing back, not a burst.
func (p *Pacer) resume(now time.Time) {
	if p.resumeAt.IsZero() || now.Before(p.resumeAt) {
		return
	}
	if r := p.rate(now); !math.IsInf(r, 1) {
		p.setPace(r*adaptiveResume, r, p.band, p.hold, p.top())
		p.next = now
	}
	p.resumeAt = time.Time{}
}

// Outcome learns from the answer to request seq, which it no longer
// counts in flight. A success grows the climb. A count of the server's
// quota replaces what was learned; a refusal without one measures the
// server and, unless it is a sibling of the last decrease, decreases the
// pace. It reports whether the refusal is that of a probe above a cap on
// the key's requests in flight the key holds: the cap goes back, and the
// request may go again at once, waiting in the key's line for room rather
// than backing off.
func (p *Pacer) Outcome(seq uint64, an Answer, now time.Time) (capped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle()
	return p.learn(seq, seq > p.cutAt, an, now)
}

// Untracked learns from the answer to a request the key did not pace,
// sent before it had learned anything: the first refusal of them is the
// event that armed the key, whichever is answered first, and the others
// its siblings. The request is not in flight; sentBefore is how many
// requests its transport sent before it. It reports whether a cap on the
// key's requests in flight explains a refusal, as Outcome does.
func (p *Pacer) Untracked(an Answer, sentBefore int64, now time.Time) (capped bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if an.Refused && sentBefore > 0 && (p.sentBeforeRefusal == 0 || sentBefore < p.sentBeforeRefusal) {
		p.sentBeforeRefusal = sentBefore
	}
	if an.Refused && an.Flight >= 0 {
		// Sent in the key's slow start with an.Flight others in flight,
		// it may have reached the server after requests sent later that
		// are still in flight, as the many a slow start's round lets go
		// in one instant do: the server may have held them all. Counted
		// with fewer, a refusal at a cap of c looks like one of c−1.
		an.Flight = max(an.Flight, p.inFlight+p.untrackedOut-1)
	}
	return p.learn(0, p.lastEmpty.IsZero(), an, now)
}

// Adopt takes in what the key did before it was armed, in its slow start
// st: the requests it let through, which it did not pace, and those still
// in flight. What the server let through is, when the key's first window
// runs out, that window's quota; those in flight count among the key's
// in flight, which a cap of the server's holds to. Each of them,
// answered, ends with Unpaced. They teach the pace nothing else, sent
// unpaced.
//
// Every one let through counts in the flights, with as many others in
// flight as it was sent with: a first window's refusals, which come all
// at once to requests sent with as many in flight as the slow start had,
// are no cap when as many went through so.
func (p *Pacer) Adopt(st *Start) {
	p.mu.Lock()
	passed := st.Passed()
	p.untrackedOK += passed
	p.freshOK += passed
	p.untrackedOut += st.Out()
	p.flights.adopt(st)
	p.mu.Unlock()
}

// Unpaced ends a request the key did not pace, that Adopt counted in
// flight, sent with others of the key's in flight (-1 when not sent):
// passed says it was let through.
func (p *Pacer) Unpaced(passed bool, others int) {
	p.mu.Lock()
	p.untrackedOut = max(p.untrackedOut-1, 0)
	p.wakeHead() // it may wait for room in the cap
	if passed {
		if p.count != nil {
			p.count.unseen++
		}
		p.untrackedOK++
		p.freshOK++
		if others >= 0 {
			p.flights.note(others, true)
		}
	}
	p.mu.Unlock()
}

// learn takes in the answer to request seq, with p.mu held; newEvent
// says a refusal in it is not the sibling of one already answered.
func (p *Pacer) learn(seq uint64, newEvent bool, an Answer, now time.Time) (capped bool) {
	if run := p.successes - p.successesAtRefusal; an.Refused && run > 0 {
		p.successesAtRefusal, p.okRunBefore = p.successes, run
	}
	if an.OK {
		p.successes++
		p.freshOK++
		if !p.lastSuccess.IsZero() {
			credit := min(now.Sub(p.lastSuccess), adaptiveMaxCredit)
			if r := p.rate(now); !math.IsInf(r, 1) {
				credit = min(credit, 2*interval(r))
			}
			if p.probing {
				credit = min(credit, adaptiveProbeGrowth) // at most a doubling a success
			}
			p.succeeding += credit
		}
		p.lastSuccess = now
		p.dryTarget, p.dry, p.dryFrom, p.dryShown = time.Time{}, 0, time.Time{}, 0
		if p.win != nil {
			p.win.succeeded(seq, p.cutAt)
		}
	}
	// Under told limits the key learns a pace from refusals alone: a
	// count of a quota the told limits read otherwise (a sliding window
	// told as a fixed one) would send bursts it refuses.
	explained := math.IsInf(p.told, 1) && p.counted(seq, an, now)
	sent, known := p.sentAs(seq)
	k := int(sent.flight)
	if seq == 0 && an.Flight >= 0 {
		k, known = an.Flight, true // sent unpaced, in the key's slow start
	}
	// uncounted is an answer no count explains: the samples, the flights
	// and a refusal's trial read it.
	uncounted := !explained && an.Remaining < 0 && (an.OK || an.Refused)
	if uncounted {
		if sent.pace > 0 {
			p.sample(sent.pace, an.OK)
		}
		// A refusal that asks for more than a second is a window's (or
		// a rate's) way, not a cap's, whose slot frees as soon as a
		// request ends: it says nothing of how many may be in flight.
		if known && !(an.Refused && an.Hint > time.Second) {
			p.flights.note(k, an.OK)
		}
	}
	if an.OK && known {
		p.capSucceeded(k)
	}
	if p.capTeller(seq) && p.capTold(seq, an, k) {
		return false
	}
	if an.Refused {
		p.refusalCounted = explained
	}
	// unexplained is a refusal no count explains: a cap, a trial or the
	// pace answers it, in that order.
	unexplained := an.Refused && !explained
	if unexplained {
		// Only the refusal of a probe above a cap the key holds is
		// explained for the retry: the cap goes back to what it was,
		// which let requests through. A cap a refusal starts or lowers is
		// still on trial, and refusals retried at once under a cap that
		// is no cap (a bucket's) would be refused again. A cap ends a
		// shedder's trial: the cap, not the trial, says what holds the
		// key.
		probe := p.capProbing
		if known && (k > 0 || p.flightCap > 0) && p.capRefused(seq, p.heldWith(seq, k), now) {
			p.shed = Trial{}
			return probe && p.flightCap > 0
		}
	}
	if uncounted && p.shed.On() && !p.blind(now) && p.trial(an.OK, now) {
		return false
	}
	if unexplained {
		if !p.blind(now) && p.startTrial(an.Hint, now) {
			return false
		}
		first := p.lastEmpty.IsZero() && p.unpaced
		p.refused(newEvent, an.Hint, now)
		if first && known && k > 0 {
			p.firstRefusalCap(now)
		}
	}
	return false
}

// sending is how a request was sent: at what learned pace, 0 when none
// paced it, and with how many of the key's requests in flight, it left
// out.
type sending struct {
	pace   float64
	flight int32
}

// sentAs returns how request seq was sent, with p.mu held, and false for
// a request the Pacer did not let go or sent too long ago to remember.
func (p *Pacer) sentAs(seq uint64) (sending, bool) {
	if seq == 0 || seq+uint64(len(p.sentWith)) <= p.sent {
		return sending{}, false
	}
	return p.sentWith[seq%uint64(len(p.sentWith))], true
}

// HintPausesKey reports whether the last refusal's long hint should
// pause the key's other requests too: not once the key showed its hints
// overstate when the quota comes back, nor when the server's count of
// its quota explained the refusal: the count says when requests may go.
func (p *Pacer) HintPausesKey() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.notWindowed && (p.count == nil || !p.refusalCounted)
}

// SetCeiling sets the rate the pace never passes, in requests a second:
// +Inf for none.
func (p *Pacer) SetCeiling(ceiling float64) {
	p.mu.Lock()
	p.ceiling = ceiling
	p.mu.Unlock()
}

// SetTold sets the pace of the told limits the key's requests go under,
// in requests a second (+Inf for none): a refusal under them starts the
// learned pace just below, and it never climbs past them, smooth: the
// told limits' bursts are what the server refused. A key that is not
// paced yet keeps to its told limits alone, bursts and all. A key
// under told limits is never taken for a window's: a told window keeps
// to a fixed one however it is aligned, and a server that refuses under
// it counts more strictly, a sliding window's way, which a pace answers.
func (p *Pacer) SetTold(told float64) {
	p.mu.Lock()
	p.told = told
	p.mu.Unlock()
}

// Pause holds the pace until until, a long pause of the server's: then it
// resumes at half.
func (p *Pacer) Pause(until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if until.After(p.resumeAt) {
		p.resumeAt = until
	}
}

// SetTrace makes f see every decision the Pacer takes, for tuning; set
// it before the Pacer is used. Without it, nothing is traced.
func (p *Pacer) SetTrace(f func(format string, args ...any)) { p.trace = f }
