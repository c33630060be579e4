package ratewise

import (
	"math"
	"sync"
	"time"
)

// This file is the retry budget: retries to a host stay within a share of
// its recent requests, plus a floor a second, so that a fleet facing a
// failing API does not multiply its load by the attempt count.
//
// Each host keeps a balance of retries. Every first attempt deposits the
// policy's RetryBudget share of a retry, the floor deposits
// RetryBudgetFloor a second, and every retry takes one whole. The balance
// is capped at the floor's reserve over retryBudgetWindow plus the share
// of retryBudgetRequests requests, so that what a long healthy spell saved
// does not pay for an outage. A host's balance starts full, and a host
// gets one only once it retries: until then, first attempts need no
// bookkeeping.

const (
	retryBudgetWindow   = 10 * time.Second
	retryBudgetRequests = 100
)

// retryBalance is one host's balance of retries.
type retryBalance struct {
	mu     sync.Mutex
	tokens float64
	at     time.Time // when the floor last paid in
	floor  float64   // the floor last paid in, a second
	ratio  float64
}

// retryBudgetCap is the most retries a balance can hold.
func retryBudgetCap(ratio, floor float64) float64 {
	return floor*retryBudgetWindow.Seconds() + ratio*retryBudgetRequests
}

// refill pays in the floor since the last time, with b.mu held.
func (b *retryBalance) refill(now time.Time) {
	b.tokens = math.Min(b.tokens+b.floor*now.Sub(b.at).Seconds(), b.cap())
	b.at = now
}

// cap is the most retries b can hold, with b.mu held.
func (b *retryBalance) cap() float64 { return retryBudgetCap(b.ratio, b.floor) }

// forgettableBalance reports whether a balance is full again: evicting it
// loses nothing, since a new one starts full.
func forgettableBalance(b *retryBalance, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.tokens >= b.cap()
}

// creditRetry adds amount to host's balance, up to its cap, when the host
// has one: a balance is made only by a retry.
func (t *Transport) creditRetry(host string, amount float64) {
	e := t.retryBudgets.Acquire(host, false)
	if e == nil {
		return
	}
	b := &e.State
	b.mu.Lock()
	b.tokens = math.Min(b.tokens+amount, b.cap())
	b.mu.Unlock()
	t.retryBudgets.Release(e)
}

// takeRetry takes one retry from host's balance under policy p, and
// reports whether there was one.
func (t *Transport) takeRetry(host string, p *RetryPolicy) bool {
	if p.RetryBudget < 0 {
		return true
	}
	e := t.retryBudgets.Acquire(host, true)
	defer t.retryBudgets.Release(e)
	b := &e.State
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() {
		b.tokens = retryBudgetCap(p.RetryBudget, p.RetryBudgetFloor)
	} else {
		b.refill(now)
	}
	b.at, b.floor, b.ratio = now, p.RetryBudgetFloor, p.RetryBudget
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
