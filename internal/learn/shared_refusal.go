package learn

import (
	"math"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is what a fleet's learned pace takes from the outcomes its
// replicas tell: a refusal decreases or measures the pace as a Pacer's
// does (refusal.go), by the turns that passed since the last event; the
// blind test's verdicts, and what passed before the key was paced.

// outcome takes in one outcome at now.
func (s *Shared) outcome(o store.Outcome, top float64, now time.Time) {
	if o.Kind == store.Withdrawn {
		s.withdrawn(o.Seq)
		return
	}
	explained := s.counted(o, now)
	switch o.Kind {
	case store.Passed:
		if s.askSeq != 0 && o.Seq == s.askSeq {
			s.askSeq = 0 // the window reopened: the others go
		}
	case store.Refused:
		s.passedBefore(o.Passed)
		if explained {
			// The count said nothing was left: the count, not a pace,
			// answers it.
			if o.Seq != 0 && o.Seq == s.askSeq {
				s.askSeq = 0
			}
			return
		}
		s.refused(o.Seq, o.Hint, top, now)
	case store.Unpaced:
		s.passedBefore(o.Passed)
	case store.Blind:
		if s.mode == sharedPaced {
			s.goBlind(now)
		}
	case store.Rated:
		s.searchFloor = 0
	case store.Undecided:
		s.searchFloor /= 2
	}
}

// withdrawn takes in that turn seq, whose answer was to be told, was
// never sent: the turns it held back go on, and a window's turn that
// asked, the window's first or the first past its quota, is no turn of
// the window; the next one asks in its place.
func (s *Shared) withdrawn(seq uint64) {
	if seq == 0 {
		return
	}
	if seq == s.askSeq {
		s.askSeq = 0
		if s.mode == sharedWindowed && seq == s.seq && seq > s.winSeq {
			s.winSeq++
		}
	}
	if seq == s.count.askSeq {
		s.count.askSeq = 0
	}
}

// passedBefore counts n requests a transport let through before it found
// the key paced: while no paced turn has passed, they are the quota of
// the first window, if the key is windowed.
func (s *Shared) passedBefore(n int) {
	if n <= 0 || s.passedPaced > 0 {
		return
	}
	s.passedFirst += n
	if s.mode == sharedWindowed && !s.confirmed {
		s.quota = s.passedFirst
	}
}

// refused learns from the refusal of turn seq (0: a request sent before
// the key was paced), whose hint was hint.
func (s *Shared) refused(seq uint64, hint time.Duration, top float64, now time.Time) {
	if s.mode == sharedBlind {
		return // left to the retries, their backoff and the breaker
	}
	if seq != 0 && seq == s.askSeq {
		s.askSeq = 0
	}
	var target time.Time
	if hint > 0 {
		target = now.Add(hint)
	}
	sibling := seq <= s.cutAt && (seq != 0 || s.mode != sharedUnpaced)
	if s.mode == sharedWindowed {
		// Every refusal of a windowed key says something of the window:
		// a sibling's hint may say it reopens sooner.
		if s.windowRefused(seq, sibling, target, top, now) {
			return
		}
		// No window after all: searched for as a key that learned nothing.
		s.notWindowed = true
		s.mode = sharedUnpaced
		sibling = false
	}
	if sibling {
		if seq > s.eventSeq {
			s.siblingRefusals++
		}
		if !target.IsZero() && (s.dryTarget.IsZero() || target.Before(s.dryTarget)) {
			s.dryTarget = target
		}
		return
	}
	passed := s.passedSince(seq)
	s.passedPaced += max(passed, 0)
	if passed > 0 || s.dryFrom.IsZero() {
		s.dry, s.dryFrom, s.dryTarget, s.dryShown = 0, now, time.Time{}, 0
		s.dryPassed, s.dryAnchor = max(passed, 0), s.emptyTarget
		if !s.lastEmpty.IsZero() {
			s.dryShown = refillRate(int64(passed), now.Sub(s.lastEmpty))
		}
	}
	if !target.IsZero() && (s.dryTarget.IsZero() || target.Before(s.dryTarget)) {
		s.dryTarget = target
	}
	s.dry++
	s.lastHint = hint
	dry := windowDry(s.dry, now.Sub(s.dryFrom), s.dryShown)
	if !s.notWindowed && math.IsInf(top, 1) && (dry || hint > time.Second) {
		s.becomeWindowed(s.dryTarget, now)
	} else {
		s.decrease(passed, hint, top, now)
	}
	s.lastEmpty, s.eventSeq, s.siblingRefusals, s.emptyTarget = now, max(seq, s.eventSeq), 0, target
}

// passedSince is how many turns went through between the last event and
// turn seq: those taken in between, less the refusals of siblings among
// them; -1 when seq is no turn.
func (s *Shared) passedSince(seq uint64) int {
	if seq == 0 || seq <= s.eventSeq {
		return -1
	}
	return max(int(seq-s.eventSeq-1)-s.siblingRefusals, 0)
}

// decrease answers a new refusal, as a Pacer's decrease does, with the
// turns that passed since the last event (-1: unknown) as its successes.
func (s *Shared) decrease(passed int, hint time.Duration, top float64, now time.Time) {
	wasUnpaced := s.mode != sharedPaced
	if passed == 0 {
		// The climb was credited turn by turn, and none of them passed:
		// a Pacer, crediting successes, did not climb.
		s.succeeding = 0
	}
	before := s.rate(top)
	s.mode = sharedPaced
	s.cutAt = s.seq
	span := now.Sub(s.lastEmpty)
	switch n := float64(passed); {
	case !wasUnpaced && !s.lastEmpty.IsZero() && span >= adaptiveMinSample && !s.slack && n >= 2:
		// A measure: between the two refusals the fleet kept the server
		// busy, and it refilled what it let through, give or take a
		// token.
		low := math.Max((n-1)/span.Seconds(), before*adaptiveCut)
		s.setMeasure(low, math.Max((n+1)/span.Seconds(), low), span, top)
	case wasUnpaced && !math.IsInf(top, 1):
		s.search(s.cutTo(top, adaptiveCut, hint), top)
	case wasUnpaced:
		start := float64(adaptiveProbeStart)
		if hint > time.Second {
			start = math.Max(adaptiveProbeStart/hint.Seconds(), adaptiveMinRate)
		}
		s.search(math.Min(start, top), top)
	case s.probing:
		s.rampFrom, s.succeeding = s.floored(s.cutTo(before, 0.5, hint)), 0
	default:
		r := s.floored(s.cutTo(before, adaptiveCut, hint))
		s.setPace(r, r, 0, 0, top)
	}
	s.slack = false
	// The server's bucket is empty now: the next turn waits an interval
	// of the new pace, after the last turn, which may be reserved ahead.
	from := now
	if s.last.After(from) {
		from = s.last
	}
	s.tat = from.Add(interval(s.rate(top)))
}

// goBlind gives the key's pace back: its refusals proved blind to it. It
// goes unpaced until now plus the hold, which doubles each time.
func (s *Shared) goBlind(now time.Time) {
	s.blindHold.Start(now)
	s.mode, s.probing, s.tat = sharedBlind, false, time.Time{}
	s.cutAt = s.seq
}
