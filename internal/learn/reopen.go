package learn

import "time"

// This file is how a key reopens when the pause its first refusal's
// hint asked for ends, or when a request sent since is let through
// sooner, before it has measured anything. A server that
// let n requests through at once, then refused with a hint, most likely
// lets as many through at once when the hint is over: a window's quota
// comes back whole, a bucket has refilled up to its burst. Plain retries
// send them all then. A pace searched from its slow start would spread
// them over most of a second, and a window would turn unused before the
// key had spent it. So from the hint's end, up to n requests go unpaced
// in a slow start of their own, one in flight and one more for each
// success, as TCP restarts after a timeout: a bucket that refilled less
// costs the refusals of one round trip. The search for a pace goes on
// from the first refusal, or once the n have gone.
//
// A reopening that let all n through also tells a window from a bucket
// at once. A bucket that refilled n since the first refusal refills at
// n over that span, at least: a request sent two of those intervals
// after the last of them finds a token. So the key sends its next
// request no sooner, and if the server refuses it, it refills nothing
// between its turns: the key is windowed. A window whose quota came
// back early in its length would otherwise turn before the refusals of
// a search had shown it dry.

// reopening is a key's reopening after its first refusal's hint.
type reopening struct {
	left   int       // requests that may still go unpaced; 0 when none
	at     time.Time // when they may: the hint's end
	open   int       // how many of them may be in flight
	since  time.Time // the first refusal: the bucket, if one, was empty then
	n      int       // requests in the reopening
	passed int       // of them, let through
	// readyAt is the last request sent when the reopening was readied:
	// the success of a later one, before the hint ends, says the server
	// turned or refilled sooner, and the reopening starts then.
	readyAt uint64
	// testSeq is the last request sent when the reopening's last success
	// came: a refusal of a later one, with no success between, says the
	// server refills nothing. 0 while no test stands.
	testSeq uint64
}

// startReopening readies the key's reopening at the end of the hint of
// its first refusal at now, with p.mu held: as many requests as the
// server let through before it.
func (p *Pacer) startReopening(hint time.Duration, now time.Time) {
	passed := p.untrackedOK + int(min(p.successes, int64(StartDone)))
	if hint <= 0 || passed < 2 {
		return
	}
	n := min(passed, StartDone)
	p.reopen = reopening{left: n, at: now.Add(hint), open: 1, since: now, n: n, readyAt: p.sent}
}

// reopenEarly starts the key's reopening at now, with p.mu held, when
// request seq, sent after it was readied and not in it, was let through
// before the hint ended: a window that turned sooner than the hint,
// rounded up to whole seconds, said, or a bucket that refilled a token.
func (p *Pacer) reopenEarly(seq uint64, now time.Time) {
	// (seq 0 and those up to readyAt were sent before the first refusal.)
	r := &p.reopen
	if r.left == 0 || r.passed > 0 || r.testSeq > 0 {
		return
	}
	if seq <= r.readyAt {
		p.reopenStraggler()
		return
	}
	if now.Before(r.at) {
		r.at = now
		if p.trace != nil {
			p.trace("%v reopens early: %d", now.Sub(p.firstSend).Round(time.Millisecond), r.n)
		}
	}
}

// reopenStraggler counts in the reopening, with p.mu held, a request
// sent before the first refusal and let through after it: the server let
// one more through at once.
func (p *Pacer) reopenStraggler() {
	if r := &p.reopen; r.left > 0 && r.passed == 0 && r.n < StartDone {
		r.n++
		r.left++
	}
}

// reopened reports whether the head of the line goes as the key's
// reopening at now, with p.mu held, or, when the reopening is full,
// returns a channel closed at the next answer. A count or a window,
// learned meanwhile, says when requests go instead.
func (p *Pacer) reopened(now time.Time) (goes bool, full <-chan struct{}) {
	r := &p.reopen
	if r.left == 0 || now.Before(r.at) {
		return false, nil
	}
	if p.count != nil || p.win != nil || p.flightCap > 0 {
		r.left = 0
		return false, nil
	}
	if p.inFlight >= r.open {
		return false, p.answered()
	}
	return true, nil
}

// reopenAnswered learns from the answer at now to a request of the
// reopening, with p.mu held: a success lets one more be in flight, and
// the last one readies the test; a refusal ends the reopening, and the
// search goes on.
func (p *Pacer) reopenAnswered(ok bool, now time.Time) {
	r := &p.reopen
	if r.n == 0 {
		return // a sibling answered after the reopening ended
	}
	if !ok {
		if p.trace != nil {
			p.trace("%v reopening refused after %d of %d", now.Sub(p.firstSend).Round(time.Millisecond), r.passed, r.n)
		}
		r.left, r.n = 0, 0
		return
	}
	r.open++
	if r.passed++; r.passed < r.n {
		return
	}
	// A bucket refilled n in the span: two of its intervals on, it holds
	// two tokens.
	r.testSeq = p.sent
	if p.trace != nil {
		p.trace("%v reopened: %d passed; test after %v", now.Sub(p.firstSend).Round(time.Millisecond), r.n, 2*now.Sub(r.since)/time.Duration(r.n))
	}
	p.next = laterOf(p.next, now.Add(2*now.Sub(r.since)/time.Duration(r.n)))
}

// reopenTested reports whether the refusal of request seq shows, with
// p.mu held, that the server refilled nothing since the reopening; a
// success ends the test.
func (p *Pacer) reopenTested(seq uint64, refused bool) bool {
	r := &p.reopen
	if r.testSeq == 0 || seq <= r.testSeq {
		return false
	}
	r.testSeq = 0
	if p.trace != nil {
		p.trace("reopening tested: refused %v", refused)
	}
	return refused
}

// laterOf is the later of a and b.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
