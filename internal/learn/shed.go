package learn

import (
	"math"
	"time"
)

// This file tells a shedder from a rate before slowing down, where the
// first refusal allows it. A bucket, a window or a cap refuses only once
// the key has taken what it holds: a fresh one lets a burst through
// first, and one that others emptied refuses every request the key sends
// until it refills, which the key's next requests, sent at once, do not
// wait for. A server shedding load refuses a share of whatever comes,
// from the first request on: the requests sent right after its refusal
// are let through as often as before it.
//
// So a refusal no hint explains, that comes before the key got
// trialPassed requests through since it last learned (or to a key whose
// refusals proved blind before), does not slow the key at once: it stays
// unpaced for its next trialAnswers answers. When trialOK of them are let
// through, the refusals are a shedder's and the key goes blind (see
// blind.go) without having slowed; when trialDry in a row are refused
// first, or too few are let through, the search for a pace starts, as
// it would have at the first refusal.

const (
	// trialPassed is how many requests, at least, a rate lets through
	// before its first refusal, unless others emptied it.
	trialPassed = 2
	// trialAnswers bounds the answers a trial takes.
	trialAnswers = 12
	// trialOK is how many of them a shedder lets through: one that
	// refuses 2 in 3 falls short in 1 trial in 20, and is then told by
	// the blind test as before.
	trialOK = 2
	// trialDry is how many refusals in a row, with none let through, end
	// a trial early: an emptied bucket's.
	trialDry = 8
	// trialSpan is how long after the refusal the trial's answers may
	// come: later, a bucket that others empty has refilled some, and lets
	// a request through as a shedder does.
	trialSpan = 20 * time.Millisecond
)

// startTrial reports whether a refusal no count explains, with hint,
// starts a trial, with p.mu held, and starts it.
func (p *Pacer) startTrial(hint time.Duration, now time.Time) bool {
	if hint > 0 || p.onTrial || !p.unpaced || !math.IsInf(p.told, 1) || p.flightCap > 0 {
		return false
	}
	if p.freshOK >= trialPassed && p.blindHold == 0 {
		return false
	}
	p.onTrial, p.trialN, p.trialPass, p.trialDry, p.trialFrom = true, 0, 0, 0, now
	if p.trace != nil {
		p.trace("trial: refused after %d let through; unpaced for %d answers", p.freshOK, trialAnswers)
	}
	return true
}

// trial takes in an answer of a key on trial, with p.mu held, and reports
// whether the answer is the trial's (a refusal then teaches nothing else).
func (p *Pacer) trial(ok bool, now time.Time) bool {
	if !p.onTrial {
		return false
	}
	p.trialN++
	if ok && now.Sub(p.trialFrom) <= trialSpan {
		p.trialPass++
		p.trialDry = 0
	} else {
		p.trialDry++
	}
	switch {
	case p.trialPass >= trialOK:
		p.onTrial = false
		if p.trace != nil {
			p.trace("trial: %d of %d let through after the refusal: shedding", p.trialPass, p.trialN)
		}
		p.goBlind(now)
	case p.trialDry >= trialDry && p.trialPass == 0 || p.trialN >= trialAnswers || now.Sub(p.trialFrom) > trialSpan:
		p.onTrial = false
		if p.trace != nil {
			p.trace("trial: %d of %d let through after the refusal: a rate", p.trialPass, p.trialN)
		}
		p.refused(true, 0, now)
	}
	return true
}
