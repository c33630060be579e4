package learn

import (
	"math"
	"sync/atomic"
)

// This file is a key's slow start, how a key that has learned nothing
// opens up: its first request goes alone, and each success lets one more
// be in flight, as TCP's window grows, so that the requests in flight
// double with each round trip until a refusal or a count says where the
// server's limit is. A first wave of many workers against a small bucket
// then costs the refusals of one round trip, not one per worker; a
// server that counts its quota says in its first answer what the rest
// may take. Answered remembers the keys whose slow start ended with
// nothing learned, so that their requests go unpaced without a look at
// their state.

// StartDone is how many requests a key in slow start may have in flight
// before its slow start ends without a rate-limit signal: from then on it
// goes unpaced, at no cost, until a signal arms its pace.
const StartDone = 256

// Start is one key's slow start. Its methods are called with the lock
// that guards the key's state held; the zero value is a key that has
// sent nothing.
type Start struct {
	open, out int // requests that may be in flight, and that are
	// okWith counts the requests let through by how many others were in
	// flight beside them (capFlights−1 for that many or more), as a
	// Pacer's flights do: armed, the key reads a cap from them. Those let
	// through alone are the rest of Passed. It is made at the first let
	// through beside others: most keys never have two in flight, and every
	// key of every scope keeps a Start.
	okWith *[capFlights]uint8
	wake   chan struct{}
}

// Enter lets a request go when the key has room in flight for one more:
// it returns how many of the key's requests were in flight beside it,
// and a nil channel. Otherwise it returns a channel closed at the key's
// next answer, which may make room.
func (s *Start) Enter() (others int, wait <-chan struct{}) {
	if s.out < max(s.open, 1) {
		others = s.out
		s.out++
		return others, nil
	}
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return 0, s.wake
}

// End ends a request of the slow start, sent with others of the key in
// flight (-1 for one not sent): a success opens the key to one more
// request in flight, and the requests waiting for room are woken. It
// reports whether the slow start reached StartDone.
func (s *Start) End(succeeded bool, others int) (done bool) {
	s.out--
	if succeeded {
		s.open = max(s.open, 1) + 1
		if k := min(others, capFlights-1); k > 0 {
			if s.okWith == nil {
				s.okWith = new([capFlights]uint8)
			}
			if s.okWith[k] < math.MaxUint8 {
				s.okWith[k]++
			}
		}
	}
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	return s.open >= StartDone
}

// Passed is how many requests of the slow start were let through.
func (s *Start) Passed() int { return max(s.open-1, 0) }

// Out is how many requests of the slow start are in flight.
func (s *Start) Out() int { return s.out }

// OKWith is how many requests of the slow start were let through with
// others in flight beside them (capFlights−1 counts that many or more;
// each count stops at 255).
func (s *Start) OKWith(others int) int {
	switch {
	case others < 0 || others >= capFlights:
		return 0
	case others == 0:
		n := s.Passed()
		if s.okWith != nil {
			for _, c := range s.okWith[1:] {
				n -= int(c)
			}
		}
		return max(n, 0)
	case s.okWith == nil:
		return 0
	}
	return int(s.okWith[others])
}

// ShowsCap reports whether the slow start's answers so far, with the
// refusal of one of its requests sent with others in flight, show a cap
// on the key's requests in flight, as the first refusal shows a Pacer
// one in doubt (see firstRefusalCap): every request sent with fewer
// others let through, twice at least, and this one refused. Those still
// in flight are counted beside it, as Pacer.Untracked counts them: sent
// in one instant, they reach the server in any order.
func (s *Start) ShowsCap(others int) bool {
	if others < 0 {
		return false
	}
	var f flights
	f.adopt(s)
	f.note(max(others, s.out-1), false)
	return f.capAt(1) > 0
}

// AnsweredSlots is how many keys an Answered remembers without keeping a
// state for them. Two keys that share a slot take turns: the one pushed
// out starts slowly again, which costs a few round trips.
const AnsweredSlots = 256

// Answered marks the keys whose slow start ended with nothing learned,
// each by its hash in the slot the hash picks. Hashes are the caller's:
// odd, so that none is 0 (an empty slot) nor what a learning key leaves
// (Learning). The zero value remembers none.
type Answered [AnsweredSlots]atomic.Uint64

// Has reports whether the key of hash h is marked answered.
func (a *Answered) Has(h uint64) bool { return a.slot(h).Load() == h }

// Mark marks the key of hash h answered: it needs no slow start, and its
// requests go unpaced.
func (a *Answered) Mark(h uint64) { a.slot(h).Store(h) }

// Learning unmarks the key of hash h: it has learned something, and its
// requests look up what.
func (a *Answered) Learning(h uint64) { a.slot(h).Store(h &^ 1) }

// slot is the slot of hash h, picked by its bits above the lowest: that
// one is always set, and would leave every even slot unused.
func (a *Answered) slot(h uint64) *atomic.Uint64 { return &a[(h>>1)%AnsweredSlots] }
