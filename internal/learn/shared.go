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
// wait for it, so that a request asks once; but no more than an interval
// ahead, since a turn reserved further would go at the pace of now after
// the pace fell. Refusals of turns taken before the last decrease are
// siblings of its event, as for a Pacer. A decrease never moves the next
// turn back before turns already reserved: it spaces the turns after
// them at the new pace (moving it back would give reserved turns twice).
//
// The climb between refusals is credited at each turn rather than at
// each success, which the store does not hear of: the gap since the last
// turn, bounded as a Pacer bounds a success's; a streak of refusals
// credits none.
//
// The refusals and the window are in shared_refusal.go and
// shared_window.go, the counts a server publishes in shared_count.go.
// redis/learned_lua.go is this file's script, function by function.
//
// A Shared is not safe for concurrent use: its store holds a lock, or
// runs a script, around each Learn.

// sharedMode is what a Shared paces by.
type sharedMode uint8

const (
	sharedUnpaced  sharedMode = iota // nothing learned: not paced
	sharedPaced                      // a learned pace: the GCRA
	sharedWindowed                   // a learned window
	sharedBlind                      // refusals blind to the pace: unpaced while blindHold holds
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

	// The pace between two refusals, as a Pacer's (see ramp.go).
	ramp

	// The last event: the turns up to cutAt are its siblings; it came at
	// lastEmpty, on turn eventSeq; siblingRefusals counts the refusals of
	// turns after eventSeq since (turns that did not pass).
	cutAt           uint64
	lastEmpty       time.Time
	eventSeq        uint64
	siblingRefusals int

	// The refusals since turns last went through: dry of them since
	// dryFrom; dryTarget is the earliest instant their hints said to come
	// back; dryShown is the rate the turns before them went through at
	// (refillRate). notWindowed is set once a window gave less than two
	// turns.
	dry         int
	dryFrom     time.Time
	dryTarget   time.Time
	dryShown    float64
	notWindowed bool
	// dryPassed is how many turns passed between the refusal before
	// the streak and its first: what a window that ran out then gave.
	// emptyTarget is when the last event's hint said to come back, zero
	// without one, and dryAnchor that of the event before the streak
	// (see earlierTurn).
	dryPassed              int
	emptyTarget, dryAnchor time.Time
	// passedFirst sums what the fleet's transports let through before
	// each saw its first refusal of the key (Outcome.Passed), and
	// passedPaced the turns that passed since, as the events counted them.
	passedFirst, passedPaced int

	// The window, when windowed (see learnedWindow): quota and confirmed
	// as a Pacer's, when it turns (windowTurns); winSeq is seq when it
	// last reopened, at openedAt; askSeq is the turn that asks whether it
	// did, whose outcome holds the others until askUntil.
	quota     int
	confirmed bool
	windowTurns
	winSeq   uint64
	askSeq   uint64
	askUntil time.Time
	// closedFrom and closedTo bound the turns of the window the last
	// refusal that confirmed a quota closed, (closedFrom, closedTo]: the
	// quota counts each of them but that refusal's, and a refusal of
	// one of them later takes it back (see windowRefused).
	closedFrom, closedTo uint64

	// blindHold holds unpaced a key whose refusals proved blind to its
	// pace.
	blindHold Hold

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
	if s.mode == sharedBlind && !s.blindHold.Holds(now) {
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
	// A refusal the count explains waits for its count, not its hint: a
	// sliding window's hint of a whole window, paused on, held the fleet
	// a window where the count let it go on (httprate's 30 per 10 s).
	a.HintsOverstate = s.notWindowed || s.count.counted && s.count.refusalCounted && s.mode != sharedBlind
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
	return math.Max(math.Min(s.climbed(), math.Min(top, adaptiveMaxRate)), adaptiveMinRate)
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
		if !s.confirmed && (used == 0 || used == s.quota) {
			// The window's first turn asks whether it reopened, and the
			// first past the quota the last window gave, whether this one
			// gives more: the others wait for its outcome, rather than go
			// at once and be refused with it.
			s.askSeq, s.askUntil = s.seq, now.Add(sharedAskTimeout)
			a.Tell = true
		}
	}
}
