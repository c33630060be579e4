package learn

import (
	"math"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file is the learned pace of a key shared by a fleet, as a store
// keeps it (store.Learned): what a Pacer learns of one key, learned from
// the refusals every replica sees, and the turns every replica takes.
//
// A Pacer measures its server between two refusals by the successes it
// saw in between. A fleet's replicas each see a part of them, so the
// store counts the turns instead: every request the fleet sends under
// the shared pace takes a numbered turn, and a refusal of turn s says
// that the turns between the last event and s (those not refused) went
// through. The pace is a GCRA without burst that the turns are taken
// from, one every interval of the pace, reserved for a request that may
// wait for it, so that a request asks once. Refusals of turns taken
// before the last decrease are siblings of its event, as for a Pacer. A
// decrease never moves the next turn back before turns already reserved:
// it spaces the turns after them at the new pace (moving it back would
// give reserved turns twice).
//
// The climb between refusals is credited at each turn rather than at
// each success, which the store does not hear of: the gap since the last
// turn, bounded as a Pacer bounds a success's.
//
// What a Pacer learns of a window is kept here too: once windowed, the
// window's turns are counted for the fleet (a quota is what a window let
// through, the fleet's turns before its first refusal), the key is held
// until it reopens, and the first turn after asks alone whether it did:
// its outcome is told (LearnAnswer.Tell), the others wait for it.
//
// A Shared is not safe for concurrent use: its store holds a lock, or
// runs a script, around each Learn.

// sharedMode is what a Shared paces by.
type sharedMode uint8

const (
	sharedUnpaced  sharedMode = iota // nothing learned: not paced
	sharedPaced                      // a learned pace: the GCRA
	sharedWindowed                   // a learned window
	sharedBlind                      // refusals blind to the pace: unpaced until blindUntil
)

// sharedAskTimeout bounds how long a window's first turn after it
// reopened holds the others back when its outcome is never told (its
// replica went away).
const sharedAskTimeout = time.Second

// sharedAskPoll is how often the others ask again while it holds them.
const sharedAskPoll = 10 * time.Millisecond

// sharedReachSlack is how much more than an interval ahead a turn may be
// reserved: the turn right after a decrease is an interval ahead, which
// clocks in floats and in nanoseconds must not tell apart.
const sharedReachSlack = time.Millisecond

// Shared is what a fleet learned of one key's server, as a store keeps
// it. The zero value has learned nothing.
type Shared struct {
	mode sharedMode

	// The turns: seq counts those taken; tat is when the next may go
	// (zero for at once); last is when the last went, for the climb's
	// credit. slack is set when the pace has not been binding at some
	// point since the last event.
	seq   uint64
	tat   time.Time
	last  time.Time
	slack bool

	// The climb, as a Pacer's (see climb): from rampFrom to rampTo over
	// adaptiveRamp of succeeding, held there for hold, then probing
	// beyond by band; probing doubles from rampFrom instead.
	probing          bool
	rampFrom, rampTo float64
	hold             time.Duration
	band             float64
	succeeding       time.Duration
	searchFloor      float64
	atFloor          bool

	// The last event: the turns up to cutAt are its siblings; it came at
	// lastEmpty, on turn eventSeq; siblingRefusals counts the refusals of
	// turns after eventSeq since (turns that did not pass).
	cutAt           uint64
	lastEmpty       time.Time
	eventSeq        uint64
	siblingRefusals int
	lastHint        time.Duration

	// The refusals since turns last went through: dry of them since
	// dryFrom; dryTarget is the earliest instant their hints said to come
	// back. notWindowed is set once a window gave less than two turns.
	dry         int
	dryFrom     time.Time
	dryTarget   time.Time
	notWindowed bool
	// passedFirst sums what the fleet's transports let through before
	// each saw its first refusal of the key (Outcome.Passed), and
	// passedPaced the turns that passed since, as the events counted them.
	passedFirst, passedPaced int

	// The window, when windowed (see learnedWindow): opens is when it
	// reopens, zero while open; winSeq is seq when it last reopened, at
	// openedAt; askSeq is the turn that asks whether it did, whose
	// outcome holds the others until askUntil.
	opens     time.Time
	quota     int
	confirmed bool
	foretold  bool
	winSeq    uint64
	openedAt  time.Time
	period    time.Duration
	probe     time.Duration
	held      time.Duration
	askSeq    uint64
	askUntil  time.Time

	// blindUntil ends the hold of a key whose refusals proved blind to
	// its pace; blindHold is how long it was, doubling each time.
	blindUntil time.Time
	blindHold  time.Duration

	// count is the last count of the server's quota an answer carried
	// (see shared_count.go).
	count sharedCount
}

// Learn takes in ask's outcomes, then, when ask.Take is set, takes the
// key's next turn at now (see store.Learned).
func (s *Shared) Learn(now time.Time, ask *store.LearnAsk) store.LearnAnswer {
	top := math.Inf(1)
	if ask.Ceiling > 0 {
		top = ask.Ceiling
	}
	if s.mode == sharedBlind && !now.Before(s.blindUntil) {
		s.mode = sharedUnpaced // the hold is over: learn again
	}
	for _, o := range ask.Outcomes {
		s.outcome(o, top, now)
	}
	var a store.LearnAnswer
	if ask.Take {
		s.take(&a, ask.MaxWait, top, now)
	}
	a.Paced = s.mode == sharedPaced || s.mode == sharedWindowed || s.count.counted && s.mode != sharedBlind
	a.HintsOverstate = s.notWindowed
	a.State = s.state(top, now)
	a.State.Counted = s.count.counted
	return a
}

// state is what the key has learned at now.
func (s *Shared) state(top float64, now time.Time) store.LearnedState {
	switch s.mode {
	case sharedPaced:
		return store.LearnedState{Rate: s.rate(top)}
	case sharedWindowed:
		st := store.LearnedState{Windowed: true, Quota: s.quota}
		if s.opens.After(now) {
			st.HeldUntil = s.opens
		}
		return st
	case sharedBlind:
		return store.LearnedState{Blind: true}
	}
	return store.LearnedState{}
}

// rate is the learned pace, in requests a second, when paced.
func (s *Shared) rate(top float64) float64 {
	var r float64
	if s.probing {
		r = s.rampFrom * math.Exp2(s.succeeding.Seconds()/adaptiveProbeGrowth.Seconds())
	} else {
		done := s.succeeding.Seconds() / adaptiveRamp.Seconds()
		beyond := (s.succeeding - adaptiveRamp - s.hold).Seconds() / adaptiveRamp.Seconds()
		switch {
		case done < 1:
			r = s.rampFrom + (s.rampTo-s.rampFrom)*done
		case beyond <= 0:
			r = s.rampTo
		default:
			r = s.rampTo + s.band*(math.Exp2(beyond)-1)
		}
	}
	return math.Max(math.Min(r, math.Min(top, adaptiveMaxRate)), adaptiveMinRate)
}

// take takes the key's next turn at now into a, for a request that may
// wait maxWait: a count of the server's quota allows it first, then the
// pace or the window.
func (s *Shared) take(a *store.LearnAnswer, maxWait time.Duration, top float64, now time.Time) {
	asks := false
	if s.count.counted && s.mode != sharedBlind {
		if a.Wait, asks = s.countWait(now); a.Wait > 0 {
			return
		}
	}
	defer func() {
		if asks && a.Took {
			// The turn that learns the new count: the others wait for it.
			s.count.askSeq, s.count.askUntil, a.Tell = a.Seq, now.Add(sharedAskTimeout), true
		}
	}()
	switch s.mode {
	case sharedUnpaced:
		if s.count.counted {
			s.seq++
			a.Took, a.Seq = true, s.seq
		}
	case sharedPaced:
		r := s.rate(top)
		iv := interval(r)
		at := s.tat
		if at.IsZero() || now.Sub(at) >= iv {
			// A turn an interval late found the pace not binding: the
			// fleet's demand fell below it, and the server refilled.
			if !at.IsZero() {
				s.slack = true
			}
			at = now
		}
		wait := max(at.Sub(now), 0)
		switch {
		case wait > maxWait:
			a.Wait = wait
			return
		case wait > iv+sharedReachSlack:
			// Reserved this far ahead, a turn would go at the pace of now
			// if the pace fell meanwhile: ask again an interval before.
			a.Wait = wait - iv
			return
		}
		// A turn a little late keeps the cadence, as a Pacer's head does.
		goes := now.Add(wait)
		if !s.last.IsZero() {
			credit := min(goes.Sub(s.last), adaptiveMaxCredit, 2*iv)
			if s.probing {
				credit = min(credit, adaptiveProbeGrowth)
			}
			s.succeeding += max(credit, 0)
		}
		s.last = goes
		s.tat = at.Add(iv)
		s.seq++
		a.Took, a.Wait, a.Seq, a.Rate = true, wait, s.seq, r
	case sharedWindowed:
		if !s.opens.IsZero() {
			if now.Before(s.opens) {
				a.Wait = s.opens.Sub(now)
				return
			}
			// The window has turned, as far as the fleet can tell.
			if !s.openedAt.IsZero() {
				if p := now.Sub(s.openedAt); s.period == 0 || p < s.period {
					s.period = p
				}
			}
			s.opens, s.openedAt, s.winSeq, s.askSeq = time.Time{}, now, s.seq, 0
		}
		used := int(s.seq - s.winSeq)
		switch {
		case s.confirmed && s.period > 0 && s.quota > 0 && used >= s.quota:
			// The quota is spent and the period says when the next turn
			// comes: hold until then rather than ask.
			// (Past already, the window turned: the next ask opens it.)
			s.opens, s.foretold = s.openedAt.Add(s.period+windowMargin), true
			a.Wait = max(s.opens.Sub(now), 0)
			return
		case s.askSeq != 0 && now.Before(s.askUntil):
			// The window's first turn asks whether it reopened: the
			// others wait for its outcome.
			a.Wait = min(sharedAskPoll, s.askUntil.Sub(now))
			return
		}
		s.seq++
		a.Took, a.Seq = true, s.seq
		if !s.confirmed && used == 0 {
			s.askSeq, s.askUntil = s.seq, now.Add(sharedAskTimeout)
			a.Tell = true
		}
	}
}

// outcome takes in one outcome at now.
func (s *Shared) outcome(o store.Outcome, top float64, now time.Time) {
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
		s.dry, s.dryFrom, s.dryTarget = 0, now, time.Time{}
	}
	if !target.IsZero() && (s.dryTarget.IsZero() || target.Before(s.dryTarget)) {
		s.dryTarget = target
	}
	s.dry++
	s.lastHint = hint
	dry := s.dry >= windowDryRefusals && now.Sub(s.dryFrom) >= windowDrySpan
	before := s.rate(top)
	if !s.notWindowed && math.IsInf(top, 1) && (dry || hint > time.Second) {
		s.becomeWindowed(s.dryTarget, now)
	} else {
		s.decrease(passed, hint, top, now)
	}
	if SharedTrace != nil {
		SharedTrace("%v event seq %d (of %d) passed %d hint %v span %v: mode %d rate %.1f -> %.1f probing %v from %.1f to %.1f",
			now.Format("05.000"), seq, s.seq, passed, hint, now.Sub(s.lastEmpty), s.mode, before, s.rate(top), s.probing, s.rampFrom, s.rampTo)
	}
	s.lastEmpty, s.eventSeq, s.siblingRefusals = now, max(seq, s.eventSeq), 0
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

// setPace starts a climb from 'from' to 'to', as a Pacer's setPace.
func (s *Shared) setPace(from, to, band float64, hold time.Duration, top float64) {
	s.probing, s.hold, s.band = false, hold, band
	if band <= 0 {
		s.band = math.Max(to-from, to*adaptiveMinBand)
	}
	s.rampFrom, s.rampTo = math.Min(from, top), math.Max(math.Min(to, top), 1e-9)
	s.succeeding = 0
}

// setMeasure paces by a measure over span, as a Pacer's setMeasure.
func (s *Shared) setMeasure(low, high float64, span time.Duration, top float64) {
	hold := probeHold(span, low)
	if s.lastHint > time.Second {
		high, hold = low, adaptiveMaxHold
	}
	s.setPace(low, high, 0, hold, top)
}

// search starts the search for a pace from start, as a Pacer's search.
func (s *Shared) search(start, top float64) {
	s.probing, s.rampFrom, s.succeeding = true, math.Min(start, top), 0
	s.searchFloor = start / blindFloorDepth
}

// floored is r held at the search's floor while the floor stands.
func (s *Shared) floored(r float64) float64 {
	if s.searchFloor <= 0 {
		return r
	}
	return math.Max(r, s.searchFloor)
}

// cutTo is rate cut by cut after a refusal whose hint was hint, as a
// Pacer's cutTo.
func (s *Shared) cutTo(rate, cut float64, hint time.Duration) float64 {
	f := floorRate(hint)
	switch {
	case rate > f*(1+1e-9): // a pace at the floor, but for rounding, is at it
		s.atFloor = false
		return math.Max(rate*cut, f)
	case !s.atFloor:
		s.atFloor = true
		return rate
	}
	return math.Max(rate*cut, adaptiveMinRate)
}

// goBlind gives the key's pace back: its refusals proved blind to it. It
// goes unpaced until now plus the hold, which doubles each time.
func (s *Shared) goBlind(now time.Time) {
	s.blindHold = min(max(2*s.blindHold, blindHoldStart), blindHoldMax)
	s.blindUntil = now.Add(s.blindHold)
	s.mode, s.probing, s.tat = sharedBlind, false, time.Time{}
	s.cutAt = s.seq
}

// becomeWindowed starts holding the key until opens, as a window's.
func (s *Shared) becomeWindowed(opens, now time.Time) {
	if opens.IsZero() || !opens.After(now) {
		opens = now.Add(windowProbeStart)
	}
	s.mode = sharedWindowed
	s.opens, s.probe, s.held = opens, windowProbeStart, opens.Sub(now)
	s.quota, s.confirmed, s.foretold, s.period, s.openedAt, s.askSeq = 0, false, false, 0, time.Time{}, 0
	if s.passedPaced == 0 {
		// Nothing paced has passed yet: the window that ran out is the
		// first, and what the fleet let through before its refusals is
		// its quota, or less when some were still on their way.
		s.quota = s.passedFirst
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
	if s.foretold && s.opens.IsZero() && seq == s.winSeq+1 {
		// Refused at the turn the period foretold, before anything of the
		// window passed: the server had not turned yet. Distrust the
		// period, and wait for the turn the hint says.
		s.period, s.foretold, s.probe = 0, false, windowProbeStart
		s.opens = now.Add(s.probe)
		if !target.IsZero() {
			s.opens = target
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
	// The turns of this window before the refused one went through.
	used := 0
	if seq > s.winSeq {
		used = int(seq - s.winSeq - 1)
	}
	if SharedTrace != nil {
		SharedTrace("%v window refused seq %d winSeq %d used %d quota %d held %v period %v", now.Format("05.000"), seq, s.winSeq, used, s.quota, s.held, s.period)
	}
	if used < 2 || used*4 < s.quota*3 {
		held := max(s.held, s.period)
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
	s.quota, s.confirmed, s.foretold = used, true, false
	s.cutAt = s.seq // turns on their way are refused with it
	switch {
	case !target.IsZero():
		s.opens, s.held = target, target.Sub(now)
	case s.period > 0 && s.openedAt.Add(s.period).After(now):
		s.opens = s.openedAt.Add(s.period)
	default:
		s.probe = windowProbeStart
		s.opens = now.Add(s.probe)
	}
	return true
}

// SharedTrace, when set, sees the shared decisions (tuning only).
var SharedTrace func(format string, args ...any)
