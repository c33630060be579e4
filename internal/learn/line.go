package learn

import (
	"math"
	"time"
)

// This file is the line a key's requests wait in. Requests wait in one
// line per key, and only its head waits for a place in the pace, so a
// pace that changes applies at once to every waiter. The head waits for
// a delay, for an answer that may make room sooner, or for both: a Pacer
// hands them back, and the caller waits on them with the lock released.

// Join puts a request in the key's line. One request at a time, the head
// of the line, waits for its place in the pace: the others wait for the
// head to go, so that a pace that changes applies at once to all of them.
// It returns how long the request should expect to wait, when that is
// known.
func (p *Pacer) Join(now time.Time) (expected time.Duration, known bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.firstSend.IsZero() {
		p.firstSend = now
	}
	p.resume(now)
	queued := p.queued
	p.queued++
	d, ready := p.wait(now)
	if ready != nil {
		return 0, false
	}
	if r := p.rate(now); queued > 0 && !math.IsInf(r, 1) {
		d += time.Duration(math.Min(float64(queued)*float64(interval(r)), float64(time.Hour)))
	}
	return d, queued == 0 || d > 0
}

// Leave takes a request out of the line, sent or not.
func (p *Pacer) Leave() {
	p.mu.Lock()
	p.queued--
	p.mu.Unlock()
}

// Head is where the head of the line is taken: a request that receives
// from it is at the head, the one request that waits for its place in
// the pace, and gives it back with ReleaseHead, sent or not.
func (p *Pacer) Head() <-chan struct{} { return p.head }

// ReleaseHead gives back the head of the line taken from Head.
func (p *Pacer) ReleaseHead() { p.head <- struct{}{} }

// Take sends the request at the head of the line if it may go now, and
// returns its number. Otherwise it returns how long until its place comes,
// or a channel closed when an answer may make room sooner, or both.
func (p *Pacer) Take(now time.Time) (seq uint64, delay time.Duration, ready <-chan struct{}, sent bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.takeLocked(now)
}

// TakeAlone sends a request that finds the line empty and may go now,
// under one hold of the lock: Join, Take and Leave at once. Nobody holds the head
// while the line is empty. It reports false, changing nothing, otherwise.
func (p *Pacer) TakeAlone(now time.Time) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queued > 0 {
		return 0, false
	}
	if p.firstSend.IsZero() {
		p.firstSend = now
	}
	seq, _, _, sent := p.takeLocked(now)
	return seq, sent
}

// takeLocked is take with p.mu held.
func (p *Pacer) takeLocked(now time.Time) (seq uint64, delay time.Duration, ready <-chan struct{}, sent bool) {
	p.resume(now)
	if delay, ready := p.wait(now); delay > 0 || ready != nil {
		if ready == nil {
			ready = p.retiring // nil unless Retirable
		}
		return 0, delay, ready, false
	}
	r := p.rate(now)
	p.tellersLate(now)
	teller := p.tellerDue()
	if !math.IsInf(r, 1) && !teller {
		// A head a little late keeps the learned cadence, which timers
		// firing late would otherwise slow; a ceiling is kept to the
		// letter, a full interval after every request. A head that comes
		// an interval late found the pace not binding: the key's demand
		// fell below it, and the server's bucket filled meanwhile.
		iv := interval(r)
		late := now.Sub(p.next)
		switch {
		case p.next.IsZero() || r >= p.ceiling:
			p.next = now.Add(iv)
		case late >= iv:
			p.slack = true
			p.next = now.Add(iv)
		default:
			p.next = p.next.Add(iv)
		}
	}
	p.sent++
	if teller && p.capTellFrom == 0 {
		p.capTellFrom = p.sent
	}
	how := sending{flight: int32(p.inFlight + p.untrackedOut)}
	if !p.unpaced && !math.IsInf(r, 1) {
		how.pace = r
	}
	p.sentWith[p.sent%uint64(len(p.sentWith))] = how
	p.inFlight++
	p.lastSend = now
	if p.count != nil {
		p.count.markSent(p.sent)
	}
	return p.sent, 0, nil, true
}

// wait is how long the head of the line waits at now, with p.mu held: a
// delay, a channel closed when an answer may make room sooner, or both.
// The head may go when both are nil.
func (p *Pacer) wait(now time.Time) (time.Duration, <-chan struct{}) {
	if p.retired {
		return 0, nil
	}
	var d time.Duration
	if p.next.After(now) {
		d = p.next.Sub(now)
	}
	if p.flightCap > 0 && p.inFlight+p.untrackedOut >= p.flightCap {
		return 0, p.answered() // the cap is full: an answer makes room
	}
	switch {
	case p.count != nil:
		cd, ready := p.count.wait(p, now)
		if d > cd {
			return d, nil // the ceiling's pace binds
		}
		return cd, ready
	case p.win != nil:
		wd, ready := p.win.wait(p, now)
		if d > wd {
			return d, nil
		}
		return wd, ready
	case p.tellerDue():
		return 0, nil // outside the pace (see capDoubt)
	}
	return d, nil
}

// Cancel withdraws a request taken that will not be sent.
func (p *Pacer) Cancel() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settle()
}

// settle ends a request in flight, with p.mu held, and wakes the head of
// the line if it waits for an answer.
func (p *Pacer) settle() {
	p.inFlight = max(p.inFlight-1, 0)
	p.wakeHead()
}

// wakeHead wakes the head of the line if it waits for an answer, with
// p.mu held.
func (p *Pacer) wakeHead() {
	if p.watched {
		close(p.changed)
		p.changed, p.watched = make(chan struct{}), false
	}
}

// answered returns a channel closed at the next answer, with p.mu held.
func (p *Pacer) answered() <-chan struct{} {
	p.watched = true
	return p.changed
}

// Busy reports whether a request the Pacer let go is still unanswered:
// what it learned may be forgotten only when none is.
func (p *Pacer) Busy() bool {
	p.mu.Lock()
	busy := p.inFlight > 0
	p.mu.Unlock()
	return busy
}

// Retirable makes the Pacer one that Retire may end: a head of the line
// that waits for its place then wakes when it does.
func (p *Pacer) Retirable() {
	p.mu.Lock()
	if p.retiring == nil && !p.retired {
		p.retiring = make(chan struct{})
	}
	p.mu.Unlock()
}

// Retire ends the Pacer's pace: every request in its line may go at once,
// for the key is paced by another now (a store's fleet pace), whom they
// ask for their turns instead.
func (p *Pacer) Retire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retired {
		return
	}
	p.retired = true
	p.wakeHead()
	if p.retiring != nil {
		close(p.retiring)
	}
}

// Retired reports whether Retire ended the Pacer's pace.
func (p *Pacer) Retired() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.retired
}
