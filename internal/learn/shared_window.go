package learn

import (
	"time"
)

// This file is a fleet's learned window, as a Pacer's (window.go): the
// key held until its window reopens, the window's turns counted for the
// fleet, and its quota confirmed by a refusal once it gave it.

// becomeWindowed starts holding the key until opens, as a window's.
func (s *Shared) becomeWindowed(opens, now time.Time) {
	s.held = 0 // how long the hint holds the key; none without one
	if opens.IsZero() || !opens.After(now) {
		opens = now.Add(windowProbeStart)
	} else {
		s.held = opens.Sub(now)
	}
	s.mode = sharedWindowed
	s.opens, s.probe = opens, windowProbeStart
	s.quota, s.confirmed, s.foretold, s.period, s.openedAt, s.askSeq = 0, false, false, 0, time.Time{}, 0
	if s.passedPaced == 0 {
		// Nothing paced has passed yet: the window that ran out is the
		// first, and what the fleet let through before its refusals is
		// its quota, or less when some were still on their way.
		s.quota = s.passedFirst
	} else if s.dryPassed >= 2 {
		// The turns that passed before the refusals that showed the
		// window: what the window that ran out gave, or less, when it
		// had given some before.
		s.quota = s.dryPassed
	}
	if turn := earlierTurn(s.dryAnchor, s.lastHint, opens, now); !turn.IsZero() {
		s.opens, s.foretold = turn, true
	}
	s.probing, s.tat = false, time.Time{}
	s.cutAt = s.seq
}

// windowRefused takes in a refusal of turn seq of a windowed key;
// target is when its hint says to come back, zero without one. It
// reports false when the window let less than two turns through since it
// reopened: the key is no longer windowed, and is paced from what the
// last window gave over how long it held the key, when that measures.
func (s *Shared) windowRefused(seq uint64, sibling bool, target time.Time, top float64, now time.Time) bool {
	if s.confirmed && seq > s.closedFrom && seq <= s.closedTo && s.quota > 0 {
		s.quota-- // a turn the quota counted, which did not pass
	}
	if s.foretold && s.opens.IsZero() && seq == s.winSeq+1 {
		// Refused at the turn the period foretold, before anything of the
		// window passed: the server had not turned yet. Distrust the
		// period, and wait for the turn the hint says; the turn that was
		// none is no start of a period either.
		s.period, s.foretold, s.probe, s.openedAt = 0, false, windowProbeStart, time.Time{}
		s.opens = now.Add(s.probe)
		if !target.IsZero() {
			s.opens = target
		}
		if s.dryTarget.After(now) && s.dryTarget.Before(s.opens) {
			s.opens = s.dryTarget // the turn an earlier hint said was not yet: back to the later one (earlierTurn)
		}
		s.cutAt = s.seq
		return true
	}
	if !s.opens.IsZero() || sibling && seq <= s.winSeq {
		// Refused before the window reopens, or a turn of the window
		// before: a sibling, or the turn that asked whether it turned.
		switch {
		case !target.IsZero() && (s.opens.IsZero() || target.Before(s.opens)):
			if !s.opens.IsZero() {
				s.opens = target
			}
		case target.IsZero() && !s.opens.IsZero() && !now.Before(s.opens):
			s.probe = min(max(2*s.probe, windowProbeStart), windowProbeMax)
			s.opens = now.Add(s.probe)
		}
		return true
	}
	if sibling {
		return true // a turn of this window sent before the last refusal of it
	}
	// What the window gave: every turn of it but the refused one, as the
	// quota below is counted. Turns taken in one instant reach the server
	// in any order: counted as the turns before the one refused, a window
	// that gave its quota to a burst could look a sliding one's, and the
	// key paced at what it gave over a whole window (a fixed window of 30
	// per 10 s that its 20 held requests reached at once, paced at 3 a
	// second). Those of them refused later take it back, as they take
	// back the quota's.
	used := 0
	if seq > s.winSeq {
		used = int(s.seq - s.winSeq - 1)
	}
	if used < 2 || used*4 < s.quota*3 {
		held := s.seedSpan()
		quota := s.quota
		if quota >= 2 && held >= adaptiveMinSample {
			// What the last window gave, over how long it held the key:
			// the long-run rate of a sliding window.
			low := float64(quota-1) / held.Seconds()
			s.mode = sharedPaced
			s.setMeasure(low, float64(quota+1)/held.Seconds(), held, top)
			s.cutAt, s.lastEmpty, s.eventSeq, s.siblingRefusals = s.seq, now, s.seq, 0
			s.notWindowed = true
			s.tat = now.Add(interval(low))
			return true
		}
		return false
	}
	// The quota is every turn the window gave but this one, less those
	// of them refused later: turns taken in one instant reach the server
	// in any order, and one taken after the turn refused may have passed
	// before it. Counted as the turns before the one refused, a quota
	// learned low is one the key then keeps to, turn after turn, with no
	// refusal to correct it.
	s.quota, s.confirmed, s.foretold = int(s.seq-s.winSeq)-1, true, false
	s.closedFrom, s.closedTo = s.winSeq, s.seq
	s.cutAt = s.seq // turns on their way are refused with it
	s.closeAt(target, now)
	return true
}
