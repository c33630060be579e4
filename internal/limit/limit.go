// Package limit is a told limit at work on one key: its turns by a token
// bucket, a spacing or a window log, and its concurrency slots, handed out
// by priority. As x/time/rate, it takes time as an argument and says how
// long a request must wait; the caller waits, within its own budget, and
// says how the wait ended.
//
// A Key is one key's state under one scope. The scope's Config may change
// (SetLimit): each Key catches up on its next use. What the scope learned
// of the key (the learned pace) is kept beside it, by its caller.
package limit

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Config is the part of a Limit that paces and caps a key, defaults
// filled in.
type Config struct {
	// Rate and Burst make a token bucket; Burst and Window a sliding
	// window log of Burst starts; MinSpacing a gap between starts,
	// varied by SpacingJitter.
	Rate          rate.Limit
	Burst         int
	Window        time.Duration
	MinSpacing    time.Duration
	SpacingJitter float64
	// Learned: the key's pace is learned, not told: no bucket is kept.
	Learned bool
	// MaxConcurrent caps the requests in flight; 0 for none.
	MaxConcurrent int
	// FailFast refuses a request that would wait; MaxQueue caps the
	// requests waiting at once (0 for none); Reserve is the tokens a
	// low-priority request leaves in the bucket.
	FailFast bool
	MaxQueue int
	Reserve  int
}

// FiniteRate reports whether r is a rate to pace by.
func FiniteRate(r rate.Limit) bool { return r != 0 && r != rate.Inf }

// Refusal is why a request may not wait for its turn: "fail-fast",
// "max-wait" or "max-queue", and how long the turn was away (0 when
// unknown).
type Refusal struct {
	Reason  string
	RetryIn time.Duration
}

func (r *Refusal) Error() string { return "ratewise: limit: " + r.Reason }

// Key is one key's state under a scope. Its zero value is not ready:
// call Init first. It is safe for concurrent use.
type Key struct {
	mu        sync.Mutex
	gen       atomic.Uint64 // the Config generation the state is set up for; written under mu
	bucket    *rate.Limiter // nil without a finite Rate, a Window, or when Learned; guarded by mu
	nextStart time.Time     // with MinSpacing: the earliest next start; guarded by mu
	window    windowLog     // with a Window: the starts in it; guarded by mu
	// yielded is set, with a Window, once the server refused a turn the
	// window gave (Yield): its turns are then spaced, Window/(Burst−½)
	// apart from nextStart, rather than given at once. Guarded by mu.
	yielded bool
	// probe is the window's probe: the first turn past its first window
	// goes alone (see probe.go). Guarded by mu.
	probe windowProbe
	// aligns is where the window stands with the server's turns, its
	// counts' resets (align.go); guarded by mu. aligned mirrors it for a
	// read without the lock: set once the window takes no more resets.
	aligns  alignState
	aligned atomic.Bool
	// earlyFrom and earlyTo bound the starts of the turns a wrong turn of
	// the server's freed early: from the probe's to its refusal.
	earlyFrom, earlyTo time.Time
	// lateRefusals counts the window's probes refused in a row by a
	// server window about to turn (late.go). Guarded by mu.
	lateRefusals int
	// slots counts the concurrency slots taken, and queued the requests
	// waiting for one, the length of queue: see TakeSlot.
	slots   atomic.Int64
	queued  atomic.Int32
	waiting int         // requests waiting in the key; guarded by mu
	queue   []*SlotWait // waiting for a concurrency slot, by priority; guarded by mu
}

// Init sets k up for cfg, the Config of generation gen.
func (k *Key) Init(gen uint64, cfg *Config) {
	k.gen.Store(gen)
	if !cfg.Learned && FiniteRate(cfg.Rate) { // an unlimited bucket needs no state
		k.bucket = rate.NewLimiter(cfg.Rate, cfg.Burst)
	}
}

// UpToDate reports whether k is set up for generation gen; it inlines,
// so that a request pays two loads for the check.
func (k *Key) UpToDate(gen uint64) bool { return k.gen.Load() == gen }

// CatchUp sets k up for cfg, the Config of generation gen, when it was
// not: a bucket keeps its tokens, and slots a raised cap frees go to the
// requests waiting for them. gen is read before cfg: a Key marked up to
// date never holds an older Config than its mark.
func (k *Key) CatchUp(gen uint64, cfg *Config, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gen.Load() == gen {
		return
	}
	k.gen.Store(gen)
	switch {
	case cfg.Learned:
	case cfg.Window > 0:
		k.bucket = nil
		k.window.resize(cfg.Burst)
		k.yielded = false // told anew: trusted again, bursts and all
		k.endProbe()
		k.probe = windowProbe{armed: k.window.n >= cfg.Burst} // and proved anew
		k.alignAnew()                                         // its resets read anew
	case !FiniteRate(cfg.Rate):
		k.bucket, k.window = nil, windowLog{}
	case k.bucket == nil:
		k.bucket = rate.NewLimiter(cfg.Rate, cfg.Burst)
	default:
		k.bucket.SetLimitAt(now, cfg.Rate)
		k.bucket.SetBurstAt(now, cfg.Burst)
	}
	k.grantFreeLocked(cfg.MaxConcurrent)
}

// Idle reports whether k holds nothing worth keeping at now: a full
// bucket, a spacing and a window that have passed, nothing in flight or
// waiting for a slot.
func (k *Key) Idle(now time.Time, window time.Duration) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.slots.Load() == 0 && len(k.queue) == 0 && !k.nextStart.After(now) &&
		k.window.idle(now, window) && (k.bucket == nil || k.bucket.TokensAt(now) >= float64(k.bucket.Burst()))
}

// BucketRate is the rate of k's token bucket, 0 when it keeps none.
func (k *Key) BucketRate() rate.Limit {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bucket == nil {
		return 0
	}
	return k.bucket.Limit()
}

// Snapshot is what k holds at now.
type Snapshot struct {
	// Tokens is what the bucket holds, or the room left in the window;
	// HasTokens is false when neither is kept.
	Tokens    float64
	HasTokens bool
	// InFlight counts the slots taken, Waiting the requests waiting.
	InFlight, Waiting int
}

// Snapshot reads k at now under cfg.
func (k *Key) Snapshot(now time.Time, cfg *Config) Snapshot {
	k.mu.Lock()
	defer k.mu.Unlock()
	var s Snapshot
	if k.bucket != nil && cfg.Rate != 0 {
		s.Tokens, s.HasTokens = max(k.bucket.TokensAt(now), 0), true
	}
	if cfg.Window > 0 {
		s.Tokens, s.HasTokens = float64(k.window.room(now, cfg.Burst, cfg.Window)), true
	}
	s.InFlight, s.Waiting = int(k.slots.Load()), k.waiting
	return s
}

// mayWaitLocked decides, with k.mu held, whether a request may queue for
// delay (0 when unknown, as for a concurrency slot) until deadline (zero
// for none).
func (k *Key) mayWaitLocked(delay time.Duration, now, deadline time.Time, cfg *Config) error {
	var reason string
	switch {
	case cfg.FailFast:
		reason = "fail-fast"
	case !deadline.IsZero() && (delay > 0 && now.Add(delay).After(deadline) || !now.Before(deadline)):
		reason = "max-wait"
	case cfg.MaxQueue > 0 && k.waiting >= cfg.MaxQueue:
		reason = "max-queue"
	default:
		return nil
	}
	return &Refusal{Reason: reason, RetryIn: delay}
}

// Enqueue counts a request among k's waiters, if it may wait delay
// (0 when unknown) until deadline; Dequeue undoes it. A *Refusal says
// why not.
func (k *Key) Enqueue(delay time.Duration, now, deadline time.Time, cfg *Config) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.mayWaitLocked(delay, now, deadline, cfg); err != nil {
		return err
	}
	k.waiting++
	return nil
}

// HoldPlace counts a request among k's waiters when it may queue at all
// (neither FailFast nor MaxQueue reached), and reports whether it did;
// Dequeue undoes it.
func (k *Key) HoldPlace(cfg *Config) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cfg.FailFast || cfg.MaxQueue > 0 && k.waiting >= cfg.MaxQueue {
		return false
	}
	k.waiting++
	return true
}

// Dequeue takes a request out of the waiters Enqueue or HoldPlace
// counted.
func (k *Key) Dequeue() {
	k.mu.Lock()
	k.waiting--
	k.mu.Unlock()
}
