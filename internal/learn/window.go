package learn

import (
	"math"
	"time"
)

// This file is a Pacer's reading of a server that gives its
// quota back all at once (a fixed window) rather than bit by bit (a
// bucket), learned from refusals alone, when no count says so.
//
// A bucket refills while it refuses: a request sent a while after a
// refusal finds a token. A window refills nothing until it turns. So a
// refusal of a request sent well after the last refusal, with no success
// in between, says the key is windowed; so does a pause of more than a
// second the server asks for. A windowed key is held until the window
// reopens: the earliest instant its refusals' hints say (a Retry-After in
// whole seconds is rounded up, and the first refusal of a window comes
// right after it turned, so its hint says the next turn best). Then the
// key sends what the last window gave at once, as a client that knows the
// window does, and one request more to learn when the next one turns.
// Once two turns have shown the window's period, and a window has given
// its quota, the key holds its requests from the quota's end to the next
// turn the period says, and sends the quota again then, without a refusal
// a window. Only a refusal says the limit changed: a turn the period
// foretold that the server had not made yet is learned from its hint
// again. The first windows that give their quota ask whether they give
// more (quotaProbe), until one gives no more: a quota learned low, from a
// window that had little left, would otherwise hold the key below its
// server for good. A window that gives less than two requests, or well
// under the last one's quota, is no window: a slow bucket, or a sliding
// window whose hint overstates the wait, which the learned pace answers
// instead, from the last window's quota over its length.

const (
	// windowDrySpan and windowDryRefusals are how long, and through how
	// many refusals of requests sent after the first, nothing must be let
	// through to show that the server refills nothing between its turns.
	windowDrySpan     = 2 * adaptiveMinSample
	windowDryRefusals = 3
	// windowDryIntervals is how many intervals of the rate the server let
	// requests through at just before (refillShown) nothing must be let
	// through, when that is shorter than windowDrySpan: a bucket that
	// refilled at that rate would have let one through by then. A window
	// that turns soon after its quota ran out may never stay dry for
	// windowDrySpan, and a key that took it for a bucket would climb to
	// its rate for the rest of its batch.
	windowDryIntervals = 3
	// windowProbeStart is the first wait before asking again whether a
	// window that said nothing of its end has turned; it doubles with each
	// refusal, up to windowProbeMax.
	windowProbeStart = 100 * time.Millisecond
	windowProbeMax   = time.Minute
)

// windowDry reports whether dry refusals in a row, over span, with
// nothing let through, show a server that refills nothing between its
// turns; shown is the rate it let requests through at just before them
// (refillRate), 0 when unknown.
func windowDry(dry int, span time.Duration, shown float64) bool {
	return dry >= windowDryRefusals && (span >= windowDrySpan || span.Seconds()*shown >= windowDryIntervals)
}

// refillRate is the rate passed requests let through over span show, in
// requests a second: what a bucket, empty at the span's start, refills at
// least. 0 when too few went through to tell.
func refillRate(passed int64, span time.Duration) float64 {
	if span <= 0 || passed <= windowDryIntervals {
		return 0
	}
	return float64(passed-1) / span.Seconds()
}

// windowAnchorSteps is how many steps back, at most, an earlier
// refusal's hint still says when the window turns (earlierTurn).
const windowAnchorSteps = 4

// earlierTurn is the first turn after now that an earlier refusal's hint
// says, a step at a time, when it comes before opens, the turn the hints
// of the refusals that showed the window say; zero otherwise. anchor is
// when the earlier hint said to come back, step the hint of the refusals
// that showed the window. A hint in whole seconds says a turn late by up
// to a second: a refusal as the window ran out amid it says it late, and
// a key (or a fleet) that searched for a pace through a window it took
// for a bucket ran it out amid it; held to that hint, its turns would
// stay late for good (1.06 of the least time on a window of 50 a
// second). The first wave's refusal came as its window ran out at its
// start: its hint says the turn best, and a window of one step comes
// back a step after each turn. The first turn there asks; a refusal of
// it sends the key back to the later turn (see windowRefused).
func earlierTurn(anchor time.Time, step time.Duration, opens, now time.Time) time.Time {
	if anchor.IsZero() || step <= 0 || now.Sub(anchor) > windowAnchorSteps*step {
		return time.Time{}
	}
	turn := anchor
	if !turn.After(now) {
		turn = anchor.Add((now.Sub(anchor)/step + 1) * step)
	}
	if !turn.Before(opens) {
		return time.Time{}
	}
	return turn
}

// learnedWindow is what a windowed key learned of its server's window.
type learnedWindow struct {
	quota int // what the last window let through; 0 before one was counted
	// guess is what the key saw let through before it learned the
	// window, while quota is 0: the first window that reopens sends that
	// many, then one more alone, then twice as many as came beyond it,
	// each batch once the last was answered, until one is refused (see
	// guessed); 0 for none.
	guess int
	// confirmed is set once a window reopened and gave its quota; before,
	// the quota is the transport's guess, and a hint may not be a turn.
	confirmed bool
	used      int // successes since the window reopened
	// openSeq is the last request sent before the window reopened: a
	// success of a later one, sent before the refusal that closed it and
	// answered after, was the window's too (see succeeded).
	openSeq uint64
	ask     quotaProbe
	// rephased is set when the hint of an ask's refusal moved the next
	// turn earlier than the period foretold: the key's phase, not its
	// period.
	rephased bool
	windowTurns
}

// quotaProbe is how a learned window asks whether its server gives more
// than the quota it learned. The first quota of a window learned from
// refusals is what it gave at the instant the key came back: a sliding
// window's leftover can make it a fraction of what the server gives, and
// a key that held to it would stay there for good. So from the first turn
// the period foretells, a window asks, once its quota was let through:
// one request more, then two, then four, each batch once the last was let
// through, until one is refused. A window that found more asks again at
// the next turn; the first that finds nothing more, at the cost of one
// refusal, settles the quota, and the key asks no more. Only a window
// whose first quota the key had no guess for asks: a key that guessed it
// (from what its slow start let through) settles it at once. Asking more
// would find a limit the server raised, but clients of a fleet that
// share no store take from each other what each left with it, and starve
// those that pace (see the CHANGELOG for the figures).
type quotaProbe struct {
	settled bool // an ask found nothing more: the key asks no more
	extra   int  // what the window may let through beyond its quota now; 0 when it does not ask
}

// turned starts a window whose quota and period are known: it asks
// unless the quota is settled.
func (q *quotaProbe) turned() {
	if !q.settled {
		q.extra = 1
	}
}

// grow lets an asking window whose allowance was let through ask for as
// much again, and reports whether it asks.
func (q *quotaProbe) grow() bool {
	if q.extra == 0 {
		return false
	}
	q.extra *= 2
	return true
}

// answered ends an ask: found says the window let more than its quota
// through.
func (q *quotaProbe) answered(found bool) {
	if q.extra == 0 {
		return
	}
	q.extra, q.settled = 0, !found
}

// windowTurns is when a learned window turns, as a Pacer's learnedWindow
// and a Shared, the fleet's, keep it.
type windowTurns struct {
	opens time.Time // when the exhausted window reopens; zero while open
	// probe is the wait before asking again when no hint said when the
	// window reopens.
	probe time.Duration
	// openedAt is when the window last reopened, and period the time
	// between two reopenings, once seen: without a hint, the next turn is
	// expected a period after the last, and once a window has given its
	// quota, nothing is sent until then. foretold is set when the window
	// reopened at the turn the period foretold, rather than a hint's.
	openedAt time.Time
	period   time.Duration
	foretold bool
	// held is how long the last hint held the key: a window's length,
	// about, when its refusal came as its quota ran out; zero while no
	// refusal of the window said when to come back.
	held time.Duration
}

// closeAt closes the window a refusal at now spent: until target, when
// the refusal's hint said when it reopens; else a period after it last
// opened, while that is ahead; else for a first probe.
func (w *windowTurns) closeAt(target, now time.Time) {
	switch {
	case !target.IsZero():
		w.opens, w.held = target, target.Sub(now)
	case w.period > 0 && w.openedAt.Add(w.period).After(now):
		w.opens = w.openedAt.Add(w.period)
	default:
		w.probe = windowProbeStart
		w.opens = now.Add(w.probe)
	}
}

// seedSpan is how long the last window held the key, over which what it
// gave measures a sliding window's rate once the key learns it is no
// window: the last hint, when there was one, else the period. The hint is
// the server's word; a period counts the time the key left a turn unused
// (idle, or held by a breaker), and a pace measured over that would stay
// far below the server's for good.
func (w *windowTurns) seedSpan() time.Duration {
	if w.held > 0 {
		return w.held
	}
	return w.period
}

// windowRefused takes in a refusal of a windowed key, with p.mu held;
// target is when its hint says to come back, zero without one. It
// reports false when the window gave less than two requests since it
// reopened: then the key is no longer windowed.
func (p *Pacer) windowRefused(target, now time.Time) bool {
	w := p.win
	if w.foretold && w.used == 0 && w.opens.IsZero() {
		// Refused at the turn the period foretold, before anything of the
		// window passed: the server had not turned yet. Distrust the
		// period, and wait for the turn the hint says.
		w.period, w.foretold, w.openedAt = 0, false, time.Time{} // that turn was none: no start of a period either
		w.probe = windowProbeStart
		w.opens = now.Add(w.probe)
		if !target.IsZero() {
			w.opens = target
		}
		if p.dryTarget.After(now) && p.dryTarget.Before(w.opens) {
			w.opens = p.dryTarget // the turn an earlier hint said was not yet: back to the later one (earlierTurn)
		}
		p.cutAt = p.sent
		return true
	}
	if !w.opens.IsZero() {
		// Refused again before the window reopens: a sibling, or a request
		// sent to ask whether it turned.
		switch {
		case !target.IsZero() && target.Before(w.opens):
			w.opens = target
		case target.IsZero() && !now.Before(w.opens):
			w.probe = min(max(2*w.probe, windowProbeStart), windowProbeMax)
			w.opens = now.Add(w.probe)
		}
		return true
	}
	if p.trace != nil {
		p.trace("%v window refused: used %d, quota %d, opens in %v", now.Sub(p.firstSend).Round(time.Millisecond),
			w.used, w.quota, target.Sub(now))
	}
	// A window that gave less than two, or under three quarters of the
	// last one's quota, is no window: a slow bucket, or a sliding window,
	// whose turns give what the last one left.
	if w.used < 2 || w.used*4 < w.quota*3 {
		p.win = nil
		if held := w.seedSpan(); w.quota >= 2 && held >= adaptiveMinSample {
			// What the last window gave, over how long it was held: the
			// long-run rate of a sliding window, which the pace starts from.
			p.seedQuota, p.seedSpan = w.quota, held
		}
		return false
	}
	asked := w.ask.extra > 0 && w.used >= w.quota // the quota passed: the ask was out
	found := w.used > w.quota
	w.ask.answered(found)
	if !w.confirmed && w.quota > 0 {
		w.ask.settled = true // the key guessed the first window's quota: it is no leftover
	}
	w.quota, w.confirmed, w.foretold = w.used, true, false
	p.cutAt = p.sent // requests on their way are refused with it
	if asked && w.period > 0 {
		// An ask the window refused came after its quota, amid the
		// window: the turn the period foretells is when it reopens, which
		// a hint in whole seconds may overstate by most of a window. A
		// hint that says an earlier turn corrects the key's phase, learned
		// from hints that said the turns late: the time to that turn is
		// no period.
		turn := w.openedAt.Add(w.period + windowMargin)
		w.rephased = !target.IsZero() && target.Before(turn)
		if !w.rephased {
			target = turn
		}
	}
	w.closeAt(target, now)
	return true
}

// becomeWindowed starts holding the key until opens, as a window's, with
// p.mu held.
func (p *Pacer) becomeWindowed(opens, now time.Time) {
	var held time.Duration // how long the hint holds the key; none without one
	if opens.IsZero() || !opens.After(now) {
		opens = now.Add(windowProbeStart)
	} else {
		held = opens.Sub(now)
	}
	if p.trace != nil {
		p.trace("%v windowed: opens in %v", now.Sub(p.firstSend).Round(time.Millisecond), opens.Sub(now))
	}
	p.win = &learnedWindow{windowTurns: windowTurns{opens: opens, probe: windowProbeStart, held: held}}
	if turn := earlierTurn(p.dryAnchor, p.lastHint, opens, now); !turn.IsZero() {
		p.win.opens, p.win.foretold = turn, true
	}
	switch {
	case p.successes > 0:
		// What the key's paced requests let through before the streak
		// of refusals that showed the window: what the window that ran
		// out gave, or less, when it had given some before. The next
		// one sends that many, then asks whether it gives more (guess).
		if p.dryPassed >= 2 {
			p.win.guess = int(min(p.dryPassed, math.MaxInt32))
		}
	case p.untrackedOK > 0:
		// Nothing paced has passed yet: the window that ran out is the
		// first, and its successes are its quota, or less when some were
		// still on their way.
		p.win.quota = p.untrackedOK
	case p.sentBeforeRefusal > 0:
		// What the transport sent before its first refusal is the first
		// window's quota, or more, when the transport calls other servers
		// too, or had requests on their way.
		p.win.quota = int(min(p.sentBeforeRefusal, math.MaxInt32))
	}
	p.cutAt = p.sent
	// The window, not a pace, says when requests go.
	p.unpaced, p.probing, p.next = true, false, time.Time{}
}

// WindowHeldUntil returns when the key's window reopens, when it is
// windowed and held; the zero time otherwise.
func (p *Pacer) WindowHeldUntil() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.win == nil {
		return time.Time{}
	}
	return p.win.opens
}

// succeeded counts the success of request seq of a windowed key, with
// p.mu held; closedAt is the last request sent when the window closed. A
// request sent in the window and answered after the refusal that closed
// it raises the quota the refusal counted: answers race, and the one
// refused may come back before others the window let through.
func (w *learnedWindow) succeeded(seq, closedAt uint64) {
	switch {
	case w.opens.IsZero():
		w.used++
	case w.confirmed && seq > w.openSeq && seq <= closedAt:
		w.quota++
	}
}

// guessed is how many requests of a window whose quota is not known
// yet may be let through or on their way, from what the key guessed of
// it: the guess, then one more, then twice as many as came beyond it.
// Without one, every request waiting would go at once, and all those
// the window's quota leaves would be refused with it.
func (w *learnedWindow) guessed() int {
	if w.used < w.guess {
		return w.guess
	}
	return w.guess + 2*(w.used-w.guess) + 1
}

// wait is how long the head of the line waits at now for the window, with
// p.mu held, and a channel closed at the next answer when the window's
// quota is on its way: the answers say whether one more fits.
func (w *learnedWindow) wait(p *Pacer, now time.Time) (time.Duration, <-chan struct{}) {
	if !w.opens.IsZero() {
		if now.Before(w.opens) {
			return w.opens.Sub(now), nil
		}
		// The window has turned, as far as the key can tell.
		if !w.openedAt.IsZero() && !w.rephased {
			if p := now.Sub(w.openedAt); w.period == 0 || p < w.period {
				w.period = p
			}
		}
		w.opens, w.used, w.openedAt, w.openSeq, w.rephased = time.Time{}, 0, now, p.sent, false
		if w.confirmed && w.period > 0 {
			w.ask.turned()
		}
	}
	// An ask goes once the quota was let through, from a sixteenth of a
	// period after the turn: by then the clients of a fleet, whose turns
	// come within a few milliseconds of each other, sent their quotas,
	// and a request a fixed window lets through came from what they
	// left. It ends a quarter of a period after the turn: the key's turns
	// are learned from hints in whole seconds, which say them late, and
	// an ask later in the window could meet the server's next turn and
	// take its quota for more of this one's.
	allowed, askAt, askEnd := w.quota, w.openedAt.Add(w.period/16), w.openedAt.Add(w.period/4)
	if w.ask.extra > 0 && !now.Before(askEnd) {
		// The ask's time is over with no refusal: what the window gave is
		// its quota, and only a refused ask settles it.
		w.ask.extra, w.quota = 0, max(w.quota, w.used)
	}
	asking := w.ask.extra > 0 && w.used >= w.quota && !now.Before(askAt)
	if asking {
		allowed = w.quota + w.ask.extra
	}
	switch {
	case w.quota > 0 && w.used+p.inFlight >= allowed && p.inFlight > 0:
		return 0, p.answered() // the last window's quota is on its way
	case w.quota == 0 && w.guess > 0 && w.used+p.inFlight >= w.guessed() && p.inFlight > 0:
		return 0, p.answered() // what the guess allows is on its way: its answers say whether more fits
	case w.confirmed && w.period > 0 && w.quota > 0 && w.used >= allowed:
		switch {
		case asking && w.ask.grow():
			return 0, nil // what the window was asked for came: ask for as much again
		case w.ask.extra > 0 && !asking:
			return askAt.Sub(now), nil
		}
		// The quota is spent and the period says when the next turn
		// comes: hold until then rather than ask.
		w.opens, w.foretold = w.openedAt.Add(w.period+windowMargin), true
		return w.opens.Sub(now), nil
	case !w.confirmed && w.used == 0 && p.inFlight > 0:
		// No reopening has been seen yet: one request asks first, and the
		// rest go once it is let through, or learn with it that the
		// window did not reopen (the hint overstated the wait).
		return 0, p.answered()
	}
	return 0, nil
}
