package store

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"
)

// Admitter is a Store that answers an attempt's questions together, in
// one round trip. When the transport's store is one, an attempt whose
// breaker, pause, told bucket or learned pace (two of them at least) the
// store keeps asks it once, through Admit, rather than once for each.
type Admitter interface {
	Store
	// Admit answers ask as BreakerAdmit, PausedUntil, Take and Learn
	// would, one after the other, atomically: the bucket's tokens are
	// taken, and the learned pace's turn, only when the breaker lets the
	// request go (closed, or the probe granted to it), the key is not
	// paused, and the tokens (and, for the turn, they) are there now. A
	// store that cannot answer ask in one round trip (keys a cluster
	// keeps apart) returns ErrCannotCombine, and the transport asks its
	// questions one by one.
	Admit(ctx context.Context, ask *AdmitAsk) (AdmitAnswer, error)
}

// ErrCannotCombine is the error of an Admitter that cannot answer an
// AdmitAsk in one round trip.
var ErrCannotCombine = errors.New("ratewise: the store cannot answer these questions in one round trip")

// AdmitAsk is what an attempt asks of an Admitter before it is sent. An
// empty key leaves its question out.
type AdmitAsk struct {
	// Breaker is the key of the breaker to be admitted through, by Rules.
	// Succeeded, when not 0, tells first of a success not told yet, of a
	// request admitted while the breaker's Gen was Succeeded-1: it clears
	// the failures, as BreakerSucceeded does, when any were counted since.
	Breaker   string
	Rules     *Rules
	Succeeded uint64
	// Pause is the key whose pause to read.
	Pause string
	// Bucket is the key of the bucket of Rate and Burst to take N tokens
	// from, when they are there now; none are taken otherwise.
	Bucket string
	N      int
	Rate   rate.Limit
	Burst  int
	// Learned is the key of the learned pace to ask as Learn would be
	// asked, with Learn, by a store that is a Learned.
	Learned string
	Learn   LearnAsk
}

// AdmitAnswer is an Admitter's answer to an AdmitAsk.
type AdmitAnswer struct {
	// Breaker is BreakerAdmit's answer, when a breaker was asked.
	Breaker Breaker
	// PausedUntil is when the key's pause ends, zero or past when it is
	// not paused.
	PausedUntil time.Time
	// Took is set when the bucket was asked; Wait is then 0 when the
	// tokens were taken, or how long until they would be there.
	Took bool
	Wait time.Duration
	// Learnt is set when the learned pace was asked (the request may go
	// by the other questions), and Learned is then Learn's answer.
	Learnt  bool
	Learned LearnAnswer
}
