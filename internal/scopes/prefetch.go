package scopes

import (
	"time"

	"github.com/ratewise/ratewise/store"
)

// This file holds what a store that is a store.Admitter answered of an
// attempt's questions together (its breaker, its pause, a told bucket's
// token, a turn of the fleet's learned pace): asked one by one, a call
// that needs no help would cost a round trip each. The answers stand for
// the attempt's first look at each, as long as it has not waited since:
// a wait makes them old, and the layers ask the store again.

// Prefetched is what an attempt's Admit answered, each answer used once,
// and none after the attempt waited (see Stale). A nil one answers
// nothing.
type Prefetched struct {
	valid                bool
	breakerKey, pauseKey string
	bucket               string // the store's key of the bucket asked, "" for none
	learned              string // the store's key of the learned pace asked, "" for none
	answer               store.AdmitAnswer
}

// Fill makes p hold a, the store's answer to ask.
func (p *Prefetched) Fill(ask *store.AdmitAsk, a store.AdmitAnswer) {
	*p = Prefetched{valid: true, breakerKey: ask.Breaker, pauseKey: ask.Pause, bucket: ask.Bucket,
		learned: ask.Learned, answer: a}
}

// BreakerAnswer is the prefetched admission of key's breaker, once.
func (p *Prefetched) BreakerAnswer(key string) (store.Breaker, bool) {
	if p == nil || !p.valid || p.breakerKey == "" || p.breakerKey != key {
		return store.Breaker{}, false
	}
	p.breakerKey = ""
	return p.answer.Breaker, true
}

// PauseAnswer is the prefetched end of key's pause, once.
func (p *Prefetched) PauseAnswer(key string) (time.Time, bool) {
	if p == nil || !p.valid || p.pauseKey == "" || p.pauseKey != key {
		return time.Time{}, false
	}
	p.pauseKey = ""
	return p.answer.PausedUntil, true
}

// learnAnswer is the prefetched answer of the learned pace storeKey, once.
func (p *Prefetched) learnAnswer(storeKey string) (store.LearnAnswer, bool) {
	if p == nil || !p.valid || !p.answer.Learnt || p.learned == "" || p.learned != storeKey {
		return store.LearnAnswer{}, false
	}
	p.learned = ""
	return p.answer.Learned, true
}

// takeAnswer is the prefetched take from the store's bucket storeKey,
// once: its wait, 0 when the token was taken.
func (p *Prefetched) takeAnswer(storeKey string) (time.Duration, bool) {
	if p == nil || !p.valid || !p.answer.Took || p.bucket == "" || p.bucket != storeKey {
		return 0, false
	}
	p.bucket = ""
	return p.answer.Wait, true
}

// Stale drops what was prefetched: the attempt waited, and the store's
// answers may have changed meanwhile.
func (p *Prefetched) Stale() {
	if p != nil {
		p.valid = false
	}
}

// AskLearned puts in ask the turn of the fleet's learned pace the
// request would ask the store for under key, and reports whether it did:
// not for a key whose requests line up for their turns, the store's last
// answer said, since only the head of the line asks (see shared.go).
func (s *Scope) AskLearned(r *Request, key string, ask *store.AdmitAsk) bool {
	var k *sharedKey
	e := s.states.Acquire(key, false)
	if e != nil {
		defer s.states.Release(e)
		k = e.State.fleet.Load()
	}
	if k != nil && k.paced.Load() {
		return false
	}
	cfg := s.cfg.Load()
	ask.Learned = s.StoreKey(key)
	ask.Learn = store.LearnAsk{Take: true, Ceiling: sharedCeiling(cfg, &r.Told), MaxWait: r.maxWait(time.Now(), time.Time{})}
	if cfg.MaxWait > 0 {
		ask.Learn.MaxWait = min(ask.Learn.MaxWait, cfg.MaxWait)
	}
	if k != nil {
		ask.Learn.Outcomes = k.toldWith(&e.State, nil) // a count kept to be told
	}
	return true
}
