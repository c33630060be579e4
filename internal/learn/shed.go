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
	// before its first refusal, unless others emptied it: its burst. A
	// shedder that refuses 2 in 3 lets as many through first once in 81
	// runs; at 2 it did once in 9, and those runs searched for a pace
	// the blind test then took up to minutes to give back.
	trialPassed = 4
	// trialAnswers bounds the answers a trial takes.
	trialAnswers = 12
	// trialOK is how many of them a shedder lets through: one that
	// refuses 2 in 3 falls short in 1 trial in 20, and is then told by
	// the blind test as before.
	trialOK = 2
	// trialDry is how many refusals in a row, with none let through, end
	// a trial early: an emptied bucket's.
	trialDry = 8
)

// TrialSpan is how long after the refusal a trial's answers may come:
// later, a bucket that others empty has refilled some, and lets a request
// through as a shedder does.
const TrialSpan = 20 * time.Millisecond

// Trial is a refusal's trial: whether the answers that come right after
// it are let through as often as a shedder lets them. A Pacer runs its
// own; a replica sharing a fleet's pace runs one for the requests it
// sends unpaced, and tells the store of the refusal only once the trial
// says a rate. The zero value runs none.
type Trial struct {
	on             bool
	n, passed, dry int // answers taken, let through, refused in a row
	from           time.Time
}

// TrialEnd is what an answer made of a trial.
type TrialEnd uint8

const (
	// TrialGoesOn: the trial takes more answers (or none runs).
	TrialGoesOn TrialEnd = iota
	// TrialShed: enough were let through: the refusals are a shedder's,
	// and the key goes blind without having slowed.
	TrialShed
	// TrialRate: too few were: the search for a pace starts, as it would
	// have at the refusal.
	TrialRate
)

// TrialStarts reports whether a refusal no count explains, with hint,
// starts a trial of a key that is not paced: passed is how many of its
// requests were let through since it last started learning, and blindBefore
// says its refusals proved blind before.
func TrialStarts(hint time.Duration, passed int, blindBefore bool) bool {
	return hint <= 0 && (passed < trialPassed || blindBefore)
}

// Start starts a trial at now, the instant of the refusal.
func (t *Trial) Start(now time.Time) { *t = Trial{on: true, from: now} }

// On reports whether a trial runs.
func (t *Trial) On() bool { return t.on }

// Answer takes in an answer to the key, let through (ok) or refused, at
// now, and says whether it ended the trial.
func (t *Trial) Answer(ok bool, now time.Time) TrialEnd {
	if !t.on {
		return TrialGoesOn
	}
	t.n++
	if ok && now.Sub(t.from) <= TrialSpan {
		t.passed++
		t.dry = 0
	} else {
		t.dry++
	}
	switch {
	case t.passed >= trialOK:
		t.on = false
		return TrialShed
	case t.dry >= trialDry && t.passed == 0 || t.n >= trialAnswers || now.Sub(t.from) > TrialSpan:
		t.on = false
		return TrialRate
	}
	return TrialGoesOn
}

// Hold is how long a key whose refusals proved blind to its pace goes
// unpaced: blindHoldStart the first time, twice as long each time after,
// blindHoldMax at most. A Pacer keeps one, a fleet's Shared one, and a
// replica one for the trials it runs alone. The zero value holds nothing
// and never held.
type Hold struct {
	until time.Time
	last  time.Duration
}

// Start holds from now, and returns for how long.
func (h *Hold) Start(now time.Time) time.Duration {
	h.last = min(max(2*h.last, blindHoldStart), blindHoldMax)
	h.until = now.Add(h.last)
	return h.last
}

// Holds reports whether the hold lasts at now.
func (h *Hold) Holds(now time.Time) bool { return now.Before(h.until) }

// Held reports whether a hold was ever started: refusals proved blind
// before, and a new one starts a trial whatever went through first.
func (h *Hold) Held() bool { return h.last > 0 }

// startTrial reports whether a refusal no count explains, with hint,
// starts a trial, with p.mu held, and starts it.
func (p *Pacer) startTrial(hint time.Duration, now time.Time) bool {
	if p.shed.On() || !p.unpaced || !math.IsInf(p.told, 1) || p.flightCap > 0 ||
		!TrialStarts(hint, p.freshOK, p.blindHold.Held()) {
		return false
	}
	p.shed.Start(now)
	if p.trace != nil {
		p.trace("trial: refused after %d let through; unpaced for %d answers", p.freshOK, trialAnswers)
	}
	return true
}

// trial takes in an answer of a key on trial, with p.mu held, and reports
// whether the answer is the trial's (a refusal then teaches nothing else).
func (p *Pacer) trial(ok bool, now time.Time) bool {
	if !p.shed.On() {
		return false
	}
	switch p.shed.Answer(ok, now) {
	case TrialShed:
		if p.trace != nil {
			p.trace("trial: %d of %d let through after the refusal: shedding", p.shed.passed, p.shed.n)
		}
		p.goBlind(now)
	case TrialRate:
		if p.trace != nil {
			p.trace("trial: %d of %d let through after the refusal: a rate", p.shed.passed, p.shed.n)
		}
		p.refused(true, 0, now)
	}
	return true
}
