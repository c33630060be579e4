package learn

import "time"

// This file is a Pacer's reading of a server that caps the requests of a
// key in flight rather than their rate: Twilio's concurrency limit,
// Mailchimp's 10 simultaneous connections, GitHub's secondary limit on
// concurrent requests, or a proxy's limit_conn. It refuses a request
// that finds N others being served, at once, and none that comes when
// fewer are, however fast they come.
//
// The Pacer notes how many of the key's requests were in flight when
// each was sent. When the refusals came only to requests sent with c or
// more others in flight, most of those were refused, and requests sent
// with c−1 others were let through, the server caps the key at c: its
// requests in flight are held to c, and its pace is given back. The cap
// is learned up and down as a window is in TCP: a refusal of a request
// sent with fewer others in flight lowers it to that many; after enough
// successes with the cap full, it is raised by one, a probe whose
// refusal sets it back and waits twice as long before the next. A
// refusal with nothing else in flight proves the server no cap: the key
// is paced again. A refusal is read with as many others in flight as
// there are at its answer, when that is more than when it was sent:
// requests let go in one instant reach the server in any order, and the
// one sent with fewer others may be the one refused. A request sent as
// another's answer came may find the server still holding that one: the
// first refusal that would lower the cap, or end it, in a while is taken
// for such a stray. A cap the first refusals show, as they start the
// search for a pace, is in doubt: a bucket's burst run out refuses a
// first wave alike, and two requests sent at once tell them apart
// (capDoubt). The key's first refusal alone is enough for a cap in
// doubt (firstRefusalCap); any other cap takes two.

const (
	// capFlights bounds the in-flight counts the Pacer keeps track of:
	// a cap larger than this is not told apart from a rate.
	capFlights = 32
	// capMinOK is how many successes, at least, must have come to
	// requests sent with fewer than c others in flight before a cap of c
	// is believed.
	capMinOK = 2
	// capGrowAfter is how many successes with the cap full, per request
	// of the cap, the Pacer waits before raising it by one, at first; each
	// probe refused doubles it, up to capGrowMax.
	capGrowAfter = 32
	capGrowMax   = 256
	// capStrayEvery is how many requests, at least, the Pacer sends
	// between two refusals it takes for strays once the cap is learned:
	// a refusal that would lower the cap, or end it, comes once in a while
	// to a request sent as another's answer came, before the server let
	// that one go; the next such refusal soon after it is the server's.
	capStrayEvery = 32
	// capForget halves the counts once they pass it, so that they
	// follow a server whose cap changes.
	capForget = 256
	// capStrays is how many refusals below the cap its test lets pass as
	// strays (see capAt).
	capStrays = 1
	// capTellers is how many requests go at once to tell a cap in doubt
	// from a bucket's burst (see capDoubt).
	capTellers = 2
)

// flights counts, by how many of the key's requests were in flight when
// each was sent, those let through and those refused.
type flights struct {
	ok, refused [capFlights]int32
	n           int32
}

// note counts an answer to a request sent with k others in flight.
func (f *flights) note(k int, ok bool) {
	k = min(k, capFlights-1)
	if ok {
		f.ok[k]++
	} else {
		f.refused[k]++
	}
	if f.n++; f.n > capForget {
		for i := range f.ok {
			f.ok[i], f.refused[i] = f.ok[i]/2, f.refused[i]/2
		}
		f.n /= 2
	}
}

// passedWith reports whether a request sent with k others in flight, or
// more, was let through.
func (f *flights) passedWith(k int) bool {
	for _, n := range f.ok[min(k, capFlights-1):] {
		if n > 0 {
			return true
		}
	}
	return false
}

// adopt counts the requests slow start st let through, each with as
// many others in flight as it was sent with.
func (f *flights) adopt(st *Start) {
	for k := range capFlights {
		for range st.OKWith(k) {
			f.note(k, true)
		}
	}
}

// capAt returns the cap the counts show, c, two or more: a number of
// others in flight some refused request was sent with, when requests sent
// with fewer were let through twice at least, and those sent with c or
// more were refused twice at least, and at least twice as often as let
// through (minRefused times at least: 1 for the doubted cap of a first
// refusal, see firstRefusalCap); 0 when they show none. Of those, it is the one the fewest
// answers contradict, the higher of two that tie: a cap learned one too
// high costs a refusal, one too low a share of the key's throughput until
// a probe finds it. A refusal below c is a stray, which one is let be:
// a request sent in the instant another's answer came, before the server
// let that one go, or sent with others in one instant that reached the
// server first, is counted with fewer others than the server held. One
// refused with none in flight is no stray: a rate's.
func (f *flights) capAt(minRefused int32) int {
	if f.refused[0] > 0 {
		return 0
	}
	var okAll, refusedAll int32
	for k := range capFlights {
		okAll, refusedAll = okAll+f.ok[k], refusedAll+f.refused[k]
	}
	best, bestOff := 0, int32(0)
	var below, strays int32 // let through and refused with fewer than c others
	for c := range capFlights {
		ok, refused := okAll-below, refusedAll-strays
		if c >= 2 && f.refused[c] > 0 && below >= capMinOK && refused >= minRefused && refused >= 2*ok {
			if off := strays + ok; best == 0 || off <= bestOff {
				best, bestOff = c, off
			}
		}
		below, strays = below+f.ok[c], strays+f.refused[c]
		if strays > capStrays {
			break
		}
	}
	return best
}

// capRefused learns from a refusal of request seq, sent with k others in
// flight, with p.mu held, and reports whether the cap explains it.
func (p *Pacer) capRefused(seq uint64, k int, now time.Time) bool {
	if p.flightCap == 0 {
		if p.capRefutedAt != 0 && seq <= p.capRefutedAt {
			return false // of the wave tellers showed no cap
		}
		c := p.flights.capAt(2)
		if p.trace != nil {
			p.trace("cap test at k=%d: ok %v refused %v -> %d", k, p.flights.ok[:8], p.flights.refused[:8], c)
		}
		if c == 0 {
			return false
		}
		p.startCap(c, now)
		if p.probing {
			p.capDoubt()
		} else {
			p.capHolds()
		}
		return true
	}
	switch {
	case !p.capProbing && k < p.flightCap && p.capStray(k):
		return true
	case k == 0:
		// Refused alone: whatever limits the key, it is not a cap.
		p.noCap()
		return false
	case k < p.flightCap-1 || k == p.flightCap-1 && !p.capProbing:
		// The server holds fewer at once than the key thought: others
		// share the cap, or it was lowered.
		p.flightCap = max(k, 1)
	case p.capProbing:
		// The probe beyond the cap was refused: back to it, and wait
		// twice as long before the next.
		p.flightCap--
		p.capGrow = min(2*p.capGrow, capGrowMax)
	}
	p.capProbing, p.capFull = false, 0
	return true
}

// CapHeld reports whether the key holds its requests in flight to a cap
// the server showed, in doubt or not.
func (p *Pacer) CapHeld() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flightCap > 0
}

// startCap holds the key's requests in flight to c, with p.mu held.
func (p *Pacer) startCap(c int, now time.Time) {
	p.flightCap, p.capGrow, p.capFull, p.capStrayAt = c, capGrowAfter, 0, 0
	if p.trace != nil {
		p.trace("%v capped: %d in flight", now.Sub(p.firstSend).Round(time.Millisecond), c)
	}
	p.cutAt = p.sent
}

// firstRefusalCap holds in doubt the cap the key's first refusal alone
// shows, with p.mu held, once the refusal started the search for a pace:
// a slow start whose round passes the cap by one is refused once, and
// the search, until a second refusal shows the cap, keeps fewer in
// flight than it holds (a cap of 5 served in 50 ms, found by the
// search's second refusal 330 ms later). The tellers tell it from a
// bucket's burst, as they tell the cap of two refusals (capDoubt).
func (p *Pacer) firstRefusalCap(now time.Time) {
	if !p.probing || p.flightCap > 0 || p.capRefutedAt != 0 {
		return
	}
	if c := p.flights.capAt(1); c > 0 {
		p.startCap(c, now)
		p.capDoubt()
	}
}

// capHolds gives the key's pace back, with p.mu held: the cap, not a
// pace, holds its requests.
func (p *Pacer) capHolds() {
	p.unpaced, p.probing, p.next, p.win = true, false, time.Time{}, nil
	p.capDoubted = false
}

// capDoubt keeps the search for a pace beside a cap the refusals that
// started it showed, with p.mu held. A bucket whose burst runs out under
// a first wave of requests refuses those sent with the most others in
// flight, as a cap does; given the pace back, the key would send the cap
// at once into the empty bucket, and each of those refusals costs its
// call the server's hint. Two requests go at once, the tellers, while
// the others keep the search's pace: a cap lets both through, and the
// pace goes; an empty bucket refuses them, a refill lets one through
// at most, and the cap ends (capTold).
func (p *Pacer) capDoubt() {
	p.capDoubted, p.capTellFrom, p.capTellOK, p.capTellBy = true, 0, 0, p.lastTarget
	p.wakeHead()
	if p.trace != nil {
		p.trace("cap %d in doubt: the search's pace holds until %d requests sent at once are answered", p.flightCap, capTellers)
	}
}

// tellersLate ends a cap in doubt whose tellers could not go before the
// hint of the refusal that showed it ended, with p.mu held, at now, as
// the first is due: by then a bucket's refill, or a window's turn, gave
// back what it refused, and they would go through whatever holds the
// key. So a window of 50 a second, its first wave of 20 refused whole
// with a hint of a second, was taken for a cap of 19: its tellers, held
// to the turn, went through, and the key sent the next window at once,
// past its quota.
func (p *Pacer) tellersLate(now time.Time) {
	if !p.capDoubted || p.capTellFrom != 0 || p.capTellBy.IsZero() || now.Before(p.capTellBy) {
		return
	}
	if p.trace != nil {
		p.trace("cap %d: its tellers go after the hint that showed it: they tell nothing, no cap", p.flightCap)
	}
	p.noCap()
}

// noCap ends the cap, with p.mu held: the refusals of requests sent so
// far show none again, if it was in doubt.
func (p *Pacer) noCap() {
	if p.capDoubted {
		p.capDoubted, p.capRefutedAt = false, p.sent
	}
	p.flightCap = 0
}

// tellerDue reports whether the next request sent is a teller of a cap
// in doubt, with p.mu held.
func (p *Pacer) tellerDue() bool {
	return p.capDoubted && (p.capTellFrom == 0 || p.sent+1 < p.capTellFrom+capTellers)
}

// capTeller reports whether request seq is a teller of a cap in doubt,
// with p.mu held.
func (p *Pacer) capTeller(seq uint64) bool {
	return p.capDoubted && p.capTellFrom != 0 && seq >= p.capTellFrom && seq < p.capTellFrom+capTellers
}

// capTold learns from the answer to teller seq of a cap in doubt, sent
// with k others in flight, with p.mu held, and reports whether it
// explains a refusal. Every teller let through, the cap holds and the
// pace goes. One refused with fewer others than the cap, as many as a
// request let through was sent with, shows a bucket's burst: the cap
// ends, and the refusal, of a request sent outside the pace, says
// nothing of it; with more others than any let through, the cap is that
// many. Refused with one fewer, the cap is one
// lower: the tellers, sent in one instant, reach the server in any
// order, and the first sent may be refused for the place the second
// took (heldWith), as when the first wave showed a cap one too high.
// Refused at the cap, it tells nothing. Either way the next requests are
// tellers.
func (p *Pacer) capTold(seq uint64, an Answer, k int) bool {
	if an.OK {
		if p.capTellOK++; p.capTellOK == capTellers {
			if p.trace != nil {
				p.trace("cap %d: its tellers went through, the pace goes", p.flightCap)
			}
			p.capHolds()
		}
		return false
	}
	if !an.Refused {
		return false
	}
	switch k = p.heldWith(seq, k); {
	case k < p.flightCap-1 && (k == 0 || p.flights.passedWith(k)):
		if p.trace != nil {
			p.trace("cap %d: a teller was refused with %d others in flight, no cap", p.flightCap, k)
		}
		p.noCap()
		return true
	case k < p.flightCap:
		// One fewer than the cap: the tellers, sent in one instant,
		// reach the server in any order (heldWith). Fewer still, and no
		// request sent with as many others went through: the first wave,
		// sent in one instant too, counted some the server held with
		// fewer others (a cap of 5 read as 7). Either way the cap is k,
		// and the next tellers tell it.
		if p.trace != nil {
			p.trace("cap %d: a teller was refused with %d others in flight: the cap is %d", p.flightCap, k, max(k, 1))
		}
		p.flightCap = max(k, 1)
	}
	p.capTellFrom, p.capTellOK = 0, 0
	return false
}

// heldWith is how many others of the key's requests the server may have
// held when it refused request seq, sent with k others in flight, with
// p.mu held: k, or more when more are in flight at its answer. Requests
// let go in one instant, as when an answer frees a place and a probe
// adds one, reach the server in any order: the one sent with fewer
// others may come last, and be refused for the cap the others filled.
// A request sent before the key was paced (seq 0) was counted so by
// Untracked already.
func (p *Pacer) heldWith(seq uint64, k int) int {
	if seq == 0 {
		return k
	}
	return max(k, p.inFlight+p.untrackedOut)
}

// capStray reports whether a refusal that would lower the cap or end it,
// with p.mu held, is taken for a stray and changes nothing: the first
// since the cap was learned, or since capStrayEvery requests.
func (p *Pacer) capStray(k int) bool {
	if p.capStrayAt != 0 && p.sent < p.capStrayAt+capStrayEvery {
		return false
	}
	p.capStrayAt = max(p.sent, 1)
	if p.trace != nil {
		p.trace("cap %d: a refusal with %d others in flight taken for a stray", p.flightCap, k)
	}
	return true
}

// capSucceeded learns from a success of a request sent with k others in
// flight, with p.mu held: enough of them with the cap full raise it by
// one, a probe.
func (p *Pacer) capSucceeded(k int) {
	if p.flightCap == 0 || k < p.flightCap-1 {
		return
	}
	if p.capProbing {
		// The probe went through: the cap is one more.
		p.capProbing, p.capGrow = false, capGrowAfter
		return
	}
	if p.capFull++; p.capFull >= p.capGrow*p.flightCap {
		p.flightCap++
		p.capProbing, p.capFull = true, 0
	}
}
