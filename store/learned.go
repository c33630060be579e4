package store

import (
	"context"
	"time"
)

// Learned keeps what adaptive limits learn of a key's server, shared by
// every transport given the same store, so that a fleet of replicas
// learns as one client: one pace the fleet takes its turns from, one
// learned window with one count of what it let through, one verdict that
// the key's refusals are blind to its pace. A refusal any replica sees
// teaches all of them; a replica never refused paces under what the fleet
// learned. The learning itself is the store's: ratewise.MemoryStore is
// the reference of what Learn does, and ratewise/redis does the same in a
// script, so that a call that needs no help costs one round trip.
//
// The transport tells the store what a turn's answer taught only when it
// matters (a refusal, or an outcome the store asked for): a success with
// nothing to teach writes nothing.
type Learned interface {
	// Learn takes in ask's outcomes, in order, then, when ask.Take is
	// set, takes key's next turn, atomically. A key that has learned
	// nothing (no refusal yet) is not paced: its answer has Paced false,
	// and the request goes as the transport's own slow start lets it.
	Learn(ctx context.Context, key string, ask *LearnAsk) (LearnAnswer, error)
}

// LearnAsk is what a transport asks of a key's learned state.
type LearnAsk struct {
	// Take asks for the request's turn; unset, Learn only takes in the
	// outcomes and reads the state, which it then leaves as it was.
	Take bool
	// MaxWait is how long the request may wait for its turn: a turn that
	// comes within it is reserved, and the request goes at its time
	// without asking again; one that does not is not taken.
	MaxWait time.Duration
	// Ceiling is the fastest the learned pace may go, in requests a
	// second (a Limit's Rate, or the told limits the request goes under);
	// 0 for none.
	Ceiling float64
	// Outcomes are answers to earlier requests, to learn from.
	Outcomes []Outcome
}

// Outcome is what the answer to a request taught, told to the store.
type Outcome struct {
	// Seq is the turn the request was sent under; 0 for a request sent
	// before the key was paced.
	Seq uint64
	// Kind says what the answer was.
	Kind OutcomeKind
	// Hint is a refusal's wait hint (Retry-After and the like), 0 for
	// none.
	Hint time.Duration
	// Passed is, with a transport's first refusal of a request sent
	// before the key was paced, or its Unpaced outcome, how many of its
	// requests the server let through before: what the fleet's did tells
	// the quota of a window that ran out then.
	Passed int
	// Counted is set when the answer carried a count of the server's
	// quota (rate-limit headers): Remaining of Limit (0 when it does not
	// say), coming back in Reset (0 when it does not say; ResetDue is set
	// when the instant it said is already past). What one replica reads,
	// every one takes from.
	Counted   bool
	Remaining int
	Limit     int
	Reset     time.Duration
	ResetDue  bool
}

// OutcomeKind is what an Outcome tells.
type OutcomeKind uint8

const (
	// Refused: the server refused the request for rate.
	Refused OutcomeKind = iota + 1
	// Passed: the server let the request through; told only when the
	// answer to its turn asked (LearnAnswer.Tell).
	Passed
	// Blind: the transport's refusals proved blind to the pace (they do
	// not fall as it slows): the key goes unpaced for a while.
	Blind
	// Rated: the refusals proved to fall with the pace, as a rate limit's
	// do: the search for a pace may go as slow as it must.
	Rated
	// Undecided: the refusals cannot yet be told blind or rated: the
	// search's floor gives way by half.
	Undecided
	// Unpaced: a transport that saw no refusal before it found the key
	// paced tells how many of its requests passed meanwhile (Passed).
	Unpaced
	// Answered: an answer told for the count it carried alone.
	Answered
	// Withdrawn: a turn taken and never sent (its request waited out a
	// pause the server asked for instead), told when the answer to it
	// was to be told (LearnAnswer.Tell): the turns it held back go on.
	Withdrawn
)

// LearnAnswer is a store's answer to a LearnAsk.
type LearnAnswer struct {
	// Paced is set when the key has learned something: its requests take
	// turns. Unset, the others are unset too, and the request goes.
	Paced bool
	// Took is set when the request got a turn: Seq names it, and it goes
	// after Wait (0 for now). Unset, Wait is how long until a turn may
	// come, when it was asked for: the request waits and asks again, or
	// gives up when that is past its MaxWait.
	Took bool
	Wait time.Duration
	Seq  uint64
	// Rate is the pace the turn was taken at, in requests a second; 0
	// when no pace gave it (a window's turn).
	Rate float64
	// Tell asks for the turn's outcome, success too: the store waits for
	// it (a window's first turn after it reopened asks whether it did).
	Tell bool
	// HintsOverstate is set once the key's server proved its hints to
	// overstate when its quota comes back, and while the count of its
	// quota explained the last refusal (none left): the count says when
	// it comes back. A long hint does not pause the key's other requests
	// then.
	HintsOverstate bool
	// State is what the key has learned, for statuses.
	State LearnedState
}

// LearnedState is what a key has learned, as a store reports it.
type LearnedState struct {
	// Rate is the pace at the moment of the answer, requests a second;
	// 0 when no pace holds the key (unpaced, windowed or blind).
	Rate float64
	// Windowed is set while the key is taken for a window's: Quota is
	// what its last window let through (0 before one was counted), and
	// HeldUntil when it reopens, zero while it is open.
	Windowed  bool
	Quota     int
	HeldUntil time.Time
	// Blind is set while the key goes unpaced, its refusals blind to its
	// pace.
	Blind bool
	// Counted is set while a count of the server's quota governs the
	// key's turns: a success whose answer carries none says it is over
	// (an Answered outcome with no count).
	Counted bool
}
