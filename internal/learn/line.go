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
func (a *Pacer) Join(now time.Time) (expected time.Duration, known bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstSend.IsZero() {
		a.firstSend = now
	}
	a.resume(now)
	queued := a.queued
	a.queued++
	d, ready := a.wait(now)
	if ready != nil {
		return 0, false
	}
	if r := a.rate(now); queued > 0 && !math.IsInf(r, 1) {
		d += time.Duration(math.Min(float64(queued)*float64(interval(r)), float64(time.Hour)))
	}
	return d, queued == 0 || d > 0
}

// Leave takes a request out of the line, sent or not.
func (a *Pacer) Leave() {
	a.mu.Lock()
	a.queued--
	a.mu.Unlock()
}

// Head is where the head of the line is taken: a request that receives
// from it is at the head, the one request that waits for its place in
// the pace, and gives it back with ReleaseHead, sent or not.
func (a *Pacer) Head() <-chan struct{} { return a.head }

// ReleaseHead gives back the head of the line taken from Head.
func (a *Pacer) ReleaseHead() { a.head <- struct{}{} }

// Take sends the request at the head of the line if it may go now, and
// returns its number. Otherwise it returns how long until its place comes,
// or a channel closed when an answer may make room sooner, or both.
func (a *Pacer) Take(now time.Time) (seq uint64, delay time.Duration, ready <-chan struct{}, sent bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.takeLocked(now)
}

// TakeAlone sends a request that finds the line empty and may go now, in
// one hold of a.mu: Join, Take and Leave at once. Nobody holds the head
// while the line is empty. It reports false, changing nothing, otherwise.
func (a *Pacer) TakeAlone(now time.Time) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queued > 0 {
		return 0, false
	}
	if a.firstSend.IsZero() {
		a.firstSend = now
	}
	seq, _, _, sent := a.takeLocked(now)
	return seq, sent
}

// takeLocked is take with a.mu held.
func (a *Pacer) takeLocked(now time.Time) (seq uint64, delay time.Duration, ready <-chan struct{}, sent bool) {
	a.resume(now)
	if delay, ready := a.wait(now); delay > 0 || ready != nil {
		return 0, delay, ready, false
	}
	if r := a.rate(now); !math.IsInf(r, 1) {
		// A head a little late keeps the learned cadence, which timers
		// firing late would otherwise slow; a ceiling is kept to the
		// letter, a full interval after every request. A head that comes
		// an interval late found the pace not binding: the key's demand
		// fell below it, and the server's bucket filled meanwhile.
		iv := interval(r)
		late := now.Sub(a.next)
		switch {
		case a.next.IsZero() || r >= a.ceiling:
			a.next = now.Add(iv)
		case late >= iv:
			a.slack = true
			a.next = now.Add(iv)
		default:
			a.next = a.next.Add(iv)
		}
	}
	a.sent++
	a.inFlight++
	a.lastSend = now
	if a.count != nil {
		a.count.markSent(a.sent)
	}
	return a.sent, 0, nil, true
}

// wait is how long the head of the line waits at now, with a.mu held: a
// delay, a channel closed when an answer may make room sooner, or both.
// The head may go when both are nil.
func (a *Pacer) wait(now time.Time) (time.Duration, <-chan struct{}) {
	var d time.Duration
	if a.next.After(now) {
		d = a.next.Sub(now)
	}
	switch {
	case a.count != nil:
		cd, ready := a.count.wait(a, now)
		if d > cd {
			return d, nil // the ceiling's pace binds
		}
		return cd, ready
	case a.win != nil:
		wd, ready := a.win.wait(a, now)
		if d > wd {
			return d, nil
		}
		return wd, ready
	}
	return d, nil
}

// Cancel withdraws a request taken that will not be sent.
func (a *Pacer) Cancel() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
}

// settle ends a request in flight, with a.mu held, and wakes the head of
// the line if it waits for an answer.
func (a *Pacer) settle() {
	a.inFlight = max(a.inFlight-1, 0)
	if a.watched {
		close(a.changed)
		a.changed, a.watched = make(chan struct{}), false
	}
}

// answered returns a channel closed at the next answer, with a.mu held.
func (a *Pacer) answered() <-chan struct{} {
	a.watched = true
	return a.changed
}

// Busy reports whether a request the Pacer let go is still unanswered:
// what it learned may be forgotten only when none is.
func (a *Pacer) Busy() bool {
	a.mu.Lock()
	busy := a.inFlight > 0
	a.mu.Unlock()
	return busy
}
