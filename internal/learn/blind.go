package learn

import (
	"math"
	"time"
)

// This file tells refusals that slowing down cures from those it does
// not. A refusal is evidence about rate only if pacing changes it: a
// token bucket, a window or a GCRA refuses a share that falls as the
// pace falls, to none below the server's rate, while a server shedding
// load refuses a share of whatever comes, however slowly it comes.
// Slowing down against such a server only loses the calls that retries
// alone would have completed.
//
// So the Pacer remembers the pace each of its first and last requests
// was sent at, and whether it was let through. When the last, sent at a
// quarter of the pace of the first or less, were let through about as
// often, and under half the time (a bucket lets through four times as
// often at a quarter of the pace, until it refuses nothing; a window that
// ran out, much less often, until it turns), and the test says so again
// blindHalf answers later (clients that share a server and take what the
// key leaves can look so for a while), the refusals are not about rate:
// the key gives its pace back, goes unpaced, and leaves the refusals to
// the retries, their backoff and the breaker, for blindHoldStart, then
// learns again, holding twice as long each time the refusals still prove
// blind. Meanwhile the search for a pace cuts no lower than an eighth of
// where it started until the test shows the refusals fall with the pace
// (or measures take it lower), a floor that halves each time the test,
// blindHalf samples on, still cannot tell: a slower bucket is reached a
// few refusals later, and a server blind to the pace is told at a pace
// that answers soon.

const (
	// blindHalf is how many answered requests the test compares: the
	// first the key paced, and the last.
	blindHalf = 6
	// blindSpread is how much slower, at least, the last must have been
	// sent than the first.
	blindSpread = 4.0
	// blindHoldStart and blindHoldMax bound how long a key whose
	// refusals proved blind to its pace goes unpaced before it tries
	// again.
	blindHoldStart = 30 * time.Second
	blindHoldMax   = 10 * time.Minute
	// blindFloorDepth is how far below where it started the search for a
	// pace goes before the test has told a rate's refusals: a pace that
	// halves at each refusal would otherwise leave it too few answers, too
	// late, when the refusals are blind to it.
	blindFloorDepth = 8
)

// paceSample is one answered request: the pace it was sent at, and
// whether it was let through (else refused).
type paceSample struct {
	pace float64
	ok   bool
}

// Samples are the first and the last requests a key sent at a learned
// pace, with their outcome: what the blind test compares. A Pacer keeps
// its own; a replica sharing a fleet's pace keeps those it sent, and
// tells the store the verdicts. The zero value is empty.
type Samples struct {
	first, last  []paceSample
	sampled      int // samples taken so far
	blindSeen    int // sampled when the test first said blind, 0 if not since
	floorLowered int // sampled when the verdict last lowered the search's floor
}

// Verdict is what the blind test says of a key's refusals.
type Verdict uint8

const (
	// NoVerdict: nothing to do yet.
	NoVerdict Verdict = iota
	// VerdictBlind: the refusals proved blind to the pace.
	VerdictBlind
	// VerdictRated: they fell with the pace: the search's floor goes.
	VerdictRated
	// VerdictUndecided: the test cannot tell yet, the pace has not
	// fallen far enough: the search's floor gives way by half.
	VerdictUndecided
)

// Note notes the answer to a request sent at a learned pace.
func (s *Samples) Note(pace float64, ok bool) {
	s.sampled++
	if len(s.first) < blindHalf {
		s.first = append(s.first, paceSample{pace: pace, ok: ok})
		return
	}
	if len(s.last) == blindHalf {
		copy(s.last, s.last[1:])
		s.last = s.last[:blindHalf-1]
	}
	s.last = append(s.last, paceSample{pace: pace, ok: ok})
}

// Reset forgets the samples: the key's pace was given back.
func (s *Samples) Reset() {
	s.first, s.last, s.blindSeen = s.first[:0], s.last[:0], 0
}

// Verdict is what the samples say at a new refusal; floored says the
// search for a pace still holds at its floor (see blindFloorDepth). trace,
// when set, sees the test.
func (s *Samples) Verdict(floored bool, trace func(format string, args ...any)) Verdict {
	if len(s.first) < blindHalf || len(s.last) < blindHalf {
		return NoVerdict
	}
	blind, rated := s.test(trace)
	switch {
	case rated:
		s.blindSeen = 0
		return VerdictRated
	case blind:
		// Twice, blindHalf samples apart: clients that share the server
		// and take what the key leaves can look blind for a while.
		if s.blindSeen == 0 {
			s.blindSeen = s.sampled
			return NoVerdict
		}
		if s.sampled-s.blindSeen >= blindHalf {
			return VerdictBlind
		}
	case floored && s.sampled-s.floorLowered >= blindHalf:
		// Undecided: the pace has not fallen far enough from the first
		// samples' to tell. A floor the refusals keep the pace at gives
		// way by half each blindHalf samples, so that the spread grows
		// until the test can tell: a bucket far below the floor is found,
		// and a server blind to the pace is told as such.
		s.floorLowered = s.sampled
		return VerdictUndecided
	}
	return NoVerdict
}

// sample notes the answer to a request sent at a learned pace, with p.mu
// held.
func (p *Pacer) sample(pace float64, ok bool) { p.blinds.Note(pace, ok) }

// rateBlind reports whether the samples show the key's refusals blind to
// its pace, with p.mu held: the last of them, sent at a pace blindSpread
// times slower than the first or more, were let through well under as
// often as a bucket would have, yet some of the time, and not much less
// often than the first.
func (p *Pacer) rateBlind() bool {
	switch p.blinds.Verdict(p.searchFloor > 0, p.trace) {
	case VerdictRated:
		p.searchFloor = 0 // a rate's refusals: the search may go lower
	case VerdictUndecided:
		p.searchFloor /= 2
	case VerdictBlind:
		return true
	}
	return false
}

// test compares the first samples with the last: blind when the
// refusals proved blind to the pace, rated when they fell with it as a
// bucket's do; neither when the samples cannot tell.
func (s *Samples) test(trace func(format string, args ...any)) (blind, rated bool) {
	earlyPace, earlyOK := halfOf(s.first)
	latePace, lateOK := halfOf(s.last)
	if trace != nil {
		trace("blind test: early %.2f/s ok %.2f, late %.2f/s ok %.2f", earlyPace, earlyOK, latePace, lateOK)
	}
	if earlyPace < blindSpread*latePace || lateOK == 0 {
		return false, false
	}
	// A bucket lets through, at the later pace, what it let through a
	// second at the earlier one: all of it once that is the slower.
	bucket := math.Min(1, earlyOK*earlyPace/latePace)
	if lateOK >= 0.6*bucket {
		return false, true
	}
	return lateOK < 0.5 && lateOK >= 0.5*earlyOK && lateOK <= 1.5*earlyOK, false
}

// halfOf is the geometric mean pace of samples, and the share of them let
// through.
func halfOf(samples []paceSample) (pace, ok float64) {
	var logs float64
	passed := 0
	for _, s := range samples {
		logs += math.Log(s.pace)
		if s.ok {
			passed++
		}
	}
	n := float64(len(samples))
	return math.Exp(logs / n), float64(passed) / n
}

// goBlind gives the key's pace back, with p.mu held: its refusals proved
// blind to it. It goes unpaced until now plus the hold, which doubles
// each time.
func (p *Pacer) goBlind(now time.Time) {
	hold := p.blindHold.Start(now)
	if p.trace != nil {
		p.trace("%v blind: refusals do not fall with the pace; unpaced for %v",
			now.Sub(p.firstSend).Round(time.Millisecond), hold)
	}
	p.unpaced, p.probing, p.next = true, false, time.Time{}
	p.blinds.Reset()
	p.cutAt = p.sent
	p.freshOK = 0
}

// blind reports whether the key goes unpaced at now, its refusals blind
// to its pace; the refusals then teach nothing.
func (p *Pacer) blind(now time.Time) bool {
	return p.blindHold.Holds(now)
}
