package ratewise

import (
	"reflect"
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file asks a store, in one round trip, everything an attempt asks of
// it before it is sent: its breaker, its pause, a told bucket's token and
// a turn of the fleet's learned pace.
// Asked one by one, a call that needs no help would cost a round trip
// each. The answers stand for the attempt's first look at each, as long
// as it has not waited since: a wait makes them old, and the layers ask
// the store again.

// prefetched is what an attempt's Admit answered, each answer used once,
// and none after the attempt waited (see stale). A nil one answers
// nothing.
type prefetched struct {
	valid                bool
	breakerKey, pauseKey string
	bucket               string // the store's key of the bucket asked, "" for none
	learned              string // the store's key of the learned pace asked, "" for none
	answer               store.AdmitAnswer
}

// combinable reports whether x is WithStore's store s: then it shares
// through s, which can answer its question with the others.
func combinable(x any, s store.Store) bool {
	if x == nil || s == nil {
		return false
	}
	t := reflect.TypeOf(x)
	return t == reflect.TypeOf(s) && t.Comparable() && x == any(s)
}

// prefetch asks the transport's store.Admitter, once, what the attempt's
// breaker, gate and told bucket would each ask of it, when at least two
// of them keep their state there. A bucket is asked only for a scope
// that has no slots (a slot comes before the turn) and is the one such
// scope of the request in the store. The transport's store is an
// store.Admitter (admitStore is set).
func (c *call) prefetch() {
	c.pre.stale() // an earlier attempt's answers
	var ask store.AdmitAsk
	parts := 0
	if b := c.t.breakers; b != nil && c.t.breakerInStore {
		ask.Breaker, ask.Rules = b.key(c.req), &b.Config().Rules
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
	if c.t.learnStore != nil && c.askLearned(&ask) {
		parts++
	}
	if parts < 2 {
		return
	}
	if ask.Breaker != "" {
		ask.Succeeded = c.t.breakers.Unsaid(ask.Breaker)
	}
	a, err := c.t.admitStore.Admit(c.ctx, &ask)
	if err != nil {
		return // each layer asks for itself, and meets the store's failure there
	}
	if c.pre == nil {
		c.pre = new(prefetched)
	}
	*c.pre = prefetched{valid: true, breakerKey: ask.Breaker, pauseKey: ask.Pause, bucket: ask.Bucket,
		learned: ask.Learned, answer: a}
}

// askLearned puts in ask the turn of the fleet's learned pace the first
// adaptive scope that applies to the request would ask the store for,
// and reports whether it did: not for a key whose requests line up for
// their turns, the store's last answer said, since only the head of the
// line asks (see limit_shared.go).
func (c *call) askLearned(ask *store.AdmitAsk) bool {
	for _, s := range c.t.scopes() {
		if !s.adaptive || s.applies != nil && !s.applies(c.req) {
			continue
		}
		key := s.key(c.req)
		var k *sharedKey
		e := s.states.Acquire(key, false)
		if e != nil {
			defer s.states.Release(e)
			k = e.State.shared.Load()
		}
		if k != nil && k.paced.Load() {
			return false
		}
		l := s.limit()
		ask.Learned = s.storeKey(key)
		ask.Learn = store.LearnAsk{Take: true, Ceiling: sharedCeiling(l, c), MaxWait: sharedMaxWait(c, time.Now(), time.Time{})}
		if l.MaxWait > 0 {
			ask.Learn.MaxWait = min(ask.Learn.MaxWait, l.MaxWait)
		}
		if k != nil {
			ask.Learn.Outcomes = k.toldWith(&e.State, nil) // a count kept to be told
		}
		return true
	}
	return false
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
func (p *prefetched) breakerAnswer(key string) (store.Breaker, bool) {
	if p == nil || !p.valid || p.breakerKey == "" || p.breakerKey != key {
		return store.Breaker{}, false
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

// learnAnswer is the prefetched answer of the learned pace storeKey, once.
func (p *prefetched) learnAnswer(storeKey string) (store.LearnAnswer, bool) {
	if p == nil || !p.valid || !p.answer.Learnt || p.learned == "" || p.learned != storeKey {
		return store.LearnAnswer{}, false
	}
	p.learned = ""
	return p.answer.Learned, true
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
