package ratewise

import (
	"context"
	"errors"
	"reflect"
	"time"

	"golang.org/x/time/rate"
)

// This file asks a store, in one round trip, everything an attempt asks of
// it before it is sent: its breaker, its pause and a told bucket's token.
// Asked one by one, a call that needs no help would cost a round trip
// each. The answers stand for the attempt's first look at each, as long
// as it has not waited since: a wait makes them old, and the layers ask
// the store again.

// AdmitStore is a Store that answers an attempt's questions together, in
// one round trip. When WithStore's store is one, an attempt whose
// breaker, pause or told bucket (two of them at least) the store keeps
// asks it once, through Admit, rather than once for each.
type AdmitStore interface {
	Store
	// Admit answers ask as BreakerAdmit, PausedUntil and Take would, one
	// after the other, atomically: the breaker's admission first (which
	// may grant the probe of a half-open breaker), then the pause, then
	// the bucket's tokens, taken only when the breaker lets the request
	// go (closed, or the probe granted to it), the key is not paused, and
	// the tokens are there now. A store that cannot answer ask in one
	// round trip (keys a cluster keeps apart) returns ErrCannotCombine,
	// and the transport asks its questions one by one.
	Admit(ctx context.Context, ask *AdmitAsk) (AdmitAnswer, error)
}

// ErrCannotCombine is the error of an AdmitStore that cannot answer an
// AdmitAsk in one round trip.
var ErrCannotCombine = errors.New("ratewise: the store cannot answer these questions in one round trip")

// AdmitAsk is what an attempt asks of an AdmitStore before it is sent.
// An empty key leaves its question out.
type AdmitAsk struct {
	// Breaker is the key of the breaker to be admitted through, by Rules.
	Breaker string
	Rules   *BreakerRules
	// Pause is the key whose pause to read.
	Pause string
	// Bucket is the key of the bucket of Rate and Burst to take N tokens
	// from, when they are there now; none are taken otherwise.
	Bucket string
	N      int
	Rate   rate.Limit
	Burst  int
}

// AdmitAnswer is an AdmitStore's answer to an AdmitAsk.
type AdmitAnswer struct {
	// Breaker is BreakerAdmit's answer, when a breaker was asked.
	Breaker SharedBreaker
	// PausedUntil is when the key's pause ends, zero or past when it is
	// not paused.
	PausedUntil time.Time
	// Took is set when the bucket was asked; Wait is then 0 when the
	// tokens were taken, or how long until they would be there, when
	// nothing was taken.
	Took bool
	Wait time.Duration
}

// prefetched is what an attempt's Admit answered, each answer used once,
// and none after the attempt waited (see stale). A nil one answers
// nothing.
type prefetched struct {
	valid                bool
	breakerKey, pauseKey string
	bucket               string // the store's key of the bucket asked, "" for none
	answer               AdmitAnswer
}

// combinable reports whether x is WithStore's store s: then it shares
// through s, which can answer its question with the others.
func combinable(x any, s Store) bool {
	if x == nil || s == nil {
		return false
	}
	t := reflect.TypeOf(x)
	return t == reflect.TypeOf(s) && t.Comparable() && x == any(s)
}

// prefetch asks the transport's AdmitStore, once, what the attempt's
// breaker, gate and told bucket would each ask of it, when at least two
// of them keep their state there. A bucket is asked only for a scope
// that has no slots (a slot comes before the turn) and is the one such
// scope of the request in the store. The transport's store is an
// AdmitStore (admitStore is set).
func (c *call) prefetch() {
	c.pre.stale() // an earlier attempt's answers
	var ask AdmitAsk
	parts := 0
	if b := c.t.breakers; b != nil && c.t.breakerInStore {
		ask.Breaker, ask.Rules = b.key(c.req), &b.config().rules
		parts++
	}
	if c.t.gateInStore {
		ask.Pause = c.gateKey()
		parts++
	}
	if s, l := c.storeBucket(); s != nil {
		ask.Bucket, ask.N, ask.Rate, ask.Burst = s.storeKey(s.key(c.req)), 1, l.Rate, l.Burst
		parts++
	}
	if parts < 2 {
		return
	}
	a, err := c.t.admitStore.Admit(c.ctx, &ask)
	if err != nil {
		return // each layer asks for itself, and meets the store's failure there
	}
	if c.pre == nil {
		c.pre = new(prefetched)
	}
	*c.pre = prefetched{valid: true, breakerKey: ask.Breaker, pauseKey: ask.Pause, bucket: ask.Bucket, answer: a}
}

// storeBucket returns the one told scope applying to the request whose
// bucket WithStore's store keeps, with no slots, and its limit; nil when
// none or several do.
func (c *call) storeBucket() (*scope, *Limit) {
	var found *scope
	var limit *Limit
	for _, s := range c.t.scopes() {
		if s.adaptive || s.applies != nil && !s.applies(c.req) {
			continue
		}
		l := s.limit()
		if l.Store == nil || !combinable(l.Store, c.t.store) {
			continue
		}
		if found != nil || l.MaxConcurrent > 0 {
			return nil, nil
		}
		found, limit = s, l
	}
	return found, limit
}

// breakerAnswer is the prefetched admission of key's breaker, once.
func (p *prefetched) breakerAnswer(key string) (SharedBreaker, bool) {
	if p == nil || !p.valid || p.breakerKey == "" || p.breakerKey != key {
		return SharedBreaker{}, false
	}
	p.breakerKey = ""
	return p.answer.Breaker, true
}

// pauseAnswer is the prefetched end of key's pause, once.
func (p *prefetched) pauseAnswer(key string) (time.Time, bool) {
	if p == nil || !p.valid || p.pauseKey == "" || p.pauseKey != key {
		return time.Time{}, false
	}
	p.pauseKey = ""
	return p.answer.PausedUntil, true
}

// takeAnswer is the prefetched take from the store's bucket storeKey,
// once: its wait, 0 when the token was taken.
func (p *prefetched) takeAnswer(storeKey string) (time.Duration, bool) {
	if p == nil || !p.valid || !p.answer.Took || p.bucket == "" || p.bucket != storeKey {
		return 0, false
	}
	p.bucket = ""
	return p.answer.Wait, true
}

// stale drops what was prefetched: the attempt waited, and the store's
// answers may have changed meanwhile.
func (p *prefetched) stale() {
	if p != nil {
		p.valid = false
	}
}
