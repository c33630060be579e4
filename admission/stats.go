package admission

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise"
)

// Why a scope refused a request: the reason of an Event, and a label of
// ScopeStats.Refused.
const (
	// ReasonLimit: the scope had no turn for the request now, and does
	// not queue (its Limit has no MaxWait, or FailFast).
	ReasonLimit = "limit"
	// ReasonMaxWait: the request's turn would come later than MaxWait,
	// or than its context's deadline.
	ReasonMaxWait = "max-wait"
	// ReasonMaxQueue: MaxQueue requests of the key were waiting already.
	ReasonMaxQueue = "max-queue"
	// ReasonCanceled: the request's context ended while it waited, or
	// while the store was asked.
	ReasonCanceled = "canceled"
	// ReasonStoreUnavailable: the scope's store failed, and fails closed
	// (its error wraps ratewise.ErrStoreUnavailable): answered 503.
	ReasonStoreUnavailable = "store-unavailable"
)

// reason is one of the Reason constants, as an index.
type reason uint8

const (
	reasonNone reason = iota
	reasonLimit
	reasonMaxWait
	reasonMaxQueue
	reasonCanceled
	reasonStoreUnavailable
	reasonCount
)

var reasonNames = [reasonCount]string{"", ReasonLimit, ReasonMaxWait, ReasonMaxQueue, ReasonCanceled, ReasonStoreUnavailable}

func (r reason) String() string { return reasonNames[r] }

// Event is a scope's decision about a request, given to the Hooks.
type Event struct {
	// Scope is the Limit's Name, Key the request's key in it ("" for a
	// global scope).
	Scope, Key string
	// Wait is, for Admitted, how long the request waited in the scope
	// (0 when it had its turn at once); for Queued, how long it will;
	// for Refused, how long until the scope would admit it, when known.
	Wait time.Duration
	// Reason is, for Refused, one of the Reason constants.
	Reason string
	// Request is the request. Do not keep it past the hook.
	Request *http.Request
}

// Hooks are funcs the Handler calls as it decides, each optional. They
// run in the request's goroutine, for every request: keep them cheap, and
// safe for concurrent use.
type Hooks struct {
	// Admitted is called for each scope that admitted a request the
	// Handler lets through, once every scope has.
	Admitted func(Event)
	// Queued is called for each scope that makes a request wait, before
	// it waits.
	Queued func(Event)
	// Refused is called for the scope that refused a request.
	Refused func(Event)
}

// scopeStats are a scope's counters.
type scopeStats struct {
	admitted, queued  atomic.Int64
	refused           [reasonCount]atomic.Int64
	depth             atomic.Int64 // waiting now
	outages           atomic.Int64
	fallbacks         atomic.Int64 // turns taken locally while the store failed
	lostGives         atomic.Int64 // tokens the store could not take back
	waitCount, waitNs atomic.Int64
	waitBuckets       []atomic.Int64 // by ratewise.WaitBuckets, not cumulative
}

// waitBounds are the upper bounds of the wait histogram.
var waitBounds = ratewise.WaitBuckets()

func (st *scopeStats) init() { st.waitBuckets = make([]atomic.Int64, len(waitBounds)) }

// observeWait counts a queued request's wait.
func (st *scopeStats) observeWait(d time.Duration) {
	st.waitCount.Add(1)
	st.waitNs.Add(int64(d))
	for i, b := range waitBounds {
		if d <= b {
			st.waitBuckets[i].Add(1)
			return
		}
	}
}

// Stats are a Handler's counts since it was made.
type Stats struct {
	// Requests counts every request the Handler served, Exempt those it
	// let through unlimited, Admitted those every scope admitted and
	// Refused the others.
	Requests int64 `json:"requests"`
	Exempt   int64 `json:"exempt"`
	Admitted int64 `json:"admitted"`
	Refused  int64 `json:"refused"`
	// Scopes are each scope's counts, in the order of their WithLimit.
	Scopes []ScopeStats `json:"scopes"`
}

// ScopeStats are one scope's counts.
type ScopeStats struct {
	Name string `json:"name"`
	// Admitted counts the requests the scope admitted and the Handler let
	// through; Queued those of them, and of the refused, that waited.
	Admitted int64 `json:"admitted"`
	Queued   int64 `json:"queued"`
	// Refused counts the requests the scope refused, by Reason; every
	// reason is there, zero or not.
	Refused map[string]int64 `json:"refused"`
	// QueueDepth is how many requests wait in the scope now, in this
	// process.
	QueueDepth int64 `json:"queue_depth"`
	// Waits are the waits of queued requests that were let through,
	// over ratewise.WaitBuckets.
	Waits ratewise.WaitStats `json:"waits"`
	// StoreOutages counts the outages of the scope's store (each starts
	// with a failure after an answer), and StoreFallbacks the turns this
	// process's own bucket gave meanwhile. StoreGivesLost counts the
	// tokens that could not be given back to the store (a later scope
	// refused, the store failed): the fleet admits that many fewer.
	StoreOutages   int64 `json:"store_outages"`
	StoreFallbacks int64 `json:"store_fallbacks"`
	StoreGivesLost int64 `json:"store_gives_lost"`
}

// Stats returns what the Handler did since it was made. Counting costs a
// few atomic adds per request; Stats itself allocates: call it when
// asked, not per request.
func (h *Handler) Stats() Stats {
	st := Stats{Exempt: h.exempt.Load(), Admitted: h.admitted.Load(), Refused: h.refused.Load()}
	st.Requests = st.Exempt + st.Admitted + st.Refused
	for _, s := range h.scopes {
		c := &s.stats
		ss := ScopeStats{
			Name: s.name, Admitted: c.admitted.Load(), Queued: c.queued.Load(), QueueDepth: c.depth.Load(),
			Refused:      make(map[string]int64, reasonCount-1),
			StoreOutages: c.outages.Load(), StoreFallbacks: c.fallbacks.Load(), StoreGivesLost: c.lostGives.Load(),
			Waits: ratewise.WaitStats{Count: c.waitCount.Load(), Total: time.Duration(c.waitNs.Load()),
				Buckets: make([]int64, len(waitBounds))},
		}
		for r := reasonLimit; r < reasonCount; r++ {
			ss.Refused[r.String()] = c.refused[r].Load()
		}
		var cumulative int64
		for i := range waitBounds {
			cumulative += c.waitBuckets[i].Load()
			ss.Waits.Buckets[i] = cumulative
		}
		st.Scopes = append(st.Scopes, ss)
	}
	return st
}

// Status is what each scope holds for a key, as Handler.Status reports
// it.
type Status struct {
	Key    string        `json:"key"`
	Scopes []ScopeStatus `json:"scopes"`
}

// ScopeStatus is one scope's state for a key.
type ScopeStatus struct {
	Name string `json:"name"`
	// Key is the key the scope keeps the state under: "" for a global
	// scope.
	Key string `json:"key"`
	// Tokens is, for a bucket, the tokens it holds (less than 0 while
	// tokens not yet come are reserved for queued requests); for a
	// window, the turns it has left. Remaining is what the headers say:
	// the whole ones, at least 0.
	Tokens    float64 `json:"tokens"`
	Remaining int     `json:"remaining"`
	// Rate (per second) and Burst are the bucket's; Burst and Window the
	// window's. ResetIn is the time until the quota is whole again.
	Rate    float64       `json:"rate_per_second,omitempty"`
	Burst   int           `json:"burst"`
	Window  time.Duration `json:"-"`
	ResetIn time.Duration `json:"-"`
	// Queued is how many of the key's requests wait in the scope, in
	// this process.
	Queued int `json:"queued"`
	// Shared is set when the scope's Store holds the bucket; Err is the
	// store's error when it could not say (Tokens and Remaining are then
	// this process's own bucket's).
	Shared bool   `json:"shared,omitempty"`
	Err    string `json:"error,omitempty"`
}

// MarshalJSON writes the status with Window and ResetIn in seconds.
func (s ScopeStatus) MarshalJSON() ([]byte, error) {
	type plain ScopeStatus
	return json.Marshal(struct {
		plain
		Window  float64 `json:"window_seconds,omitempty"`
		ResetIn float64 `json:"reset_in_seconds"`
	}{plain(s), s.Window.Seconds(), s.ResetIn.Seconds()})
}

// Status reports what each scope holds for key: the tokens of its bucket
// or the turns left in its window, and the time until it is whole again.
// key is what a scope's Key returns for a request (the client's IP for a
// scope keyed by it, as ClientIP reads it); a global scope ignores it. It
// creates no state; a scope with a Store asks it (one round trip, bounded
// by the store's own timeout). A scope that limits nothing is left out.
func (h *Handler) Status(ctx context.Context, key string) Status {
	now := h.now()
	st := Status{Key: key}
	for _, s := range h.scopes {
		if s.kind == kindNone {
			continue
		}
		ss := ScopeStatus{Name: s.name, Key: key, Burst: s.quota()}
		if s.global {
			ss.Key = ""
		}
		if s.kind == kindBucket {
			ss.Rate = float64(s.rate)
		} else {
			ss.Window = time.Duration(s.window)
		}
		e := s.one
		if !s.global {
			e = s.keys.lookup(key)
		}
		if e == nil {
			e = &entry{}
		}
		ss.Queued = int(e.waiting.Load())
		var v view
		if s.store != nil {
			tokens, err := s.store.Tokens(ctx, s.storeKey(key), s.rate, s.burst)
			if err == nil {
				ss.Shared, ss.Tokens = true, tokens
				v = s.sharedView(tokens)
			} else {
				ss.Err = ratewise.Redact(err.Error(), nil)
			}
		}
		if !ss.Shared {
			switch s.kind {
			case kindBucket:
				v = e.bucketView(now, s.interval, s.tau)
				ss.Tokens = float64(s.tau-max(e.tat.Load()-now, 0)) / float64(s.interval)
			case kindWindow:
				v = e.windowView(now, s.window, s.limit)
				ss.Tokens = float64(v.remaining)
			}
		}
		ss.Remaining, ss.ResetIn = int(min(v.remaining, math.MaxInt32)), time.Duration(v.reset)
		st.Scopes = append(st.Scopes, ss)
	}
	return st
}
