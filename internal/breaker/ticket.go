package breaker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ratewise/ratewise/store"
)

// Rate-limit events: a server that runs out of quota refuses every
// request in flight at that moment, and those refusals are one event, not
// one failure each. A key counts the rate-limit failures it has counted
// (events); an attempt notes that count when it is sent, and its refusal
// counts only if no other was counted since: the first refusal of a burst
// counts, its siblings, sent before it was seen, count neither way. Nor
// does a refusal that comes before the wait hint of the last event
// counted ran out: its request did not honour that hint. Refusals of
// requests sent after one was seen and after its hint, honouring the
// pace, are new events, and those are what trip a breaker. The fast path
// pays one atomic load at the send for this.

// MinEventLength is how long a rate-limit event lasts at least, and
// without a wait hint: a second, the shortest wait Retry-After can ask.
const MinEventLength = time.Second

// Result is an attempt's outcome as its caller read it.
type Result uint8

const (
	// Success clears the failures counted.
	Success Result = iota
	// Failure counts against the breaker.
	Failure
	// Excluded counts neither way: the caller gave up, say.
	Excluded
)

// Ticket is an admitted attempt whose outcome its breaker awaits. It is a
// value, so an attempt that is no probe allocates nothing for it. It holds
// its key's entry, so the breaker is not evicted under it, until the
// outcome is told or the attempt withdrawn. The zero Ticket is no breaker.
type Ticket struct {
	b     *Breakers // nil: no breaker
	key   string
	entry *Entry
	done  func(error) // gobreaker's, unless fast
	probe *probeGuard // set for a half-open probe
	fast  bool        // admitted without gobreaker, in generation gen
	gen   uint64
	event uint64 // the key's rate-limit events when the attempt was sent
	// With a store: whether the attempt is the shared breaker's probe (and
	// its name), or was admitted while the shared breaker was closed.
	sharedProbe   bool
	sharedClosed  bool
	sharedProbeID uint64
	// sharedFailures and sharedGen are the store's Failures and Gen when
	// the attempt was admitted.
	sharedFailures int
	sharedGen      uint64
	// heard, when set (SetHeard), is told of the changes the attempt's
	// outcome causes, through Config.Hear.
	heard any
}

// Admitted reports whether t is an admitted attempt's, not the zero
// Ticket.
func (t *Ticket) Admitted() bool { return t.b != nil }

// SetHeard makes heard, given to Config.Hear, hear the changes the
// attempt's outcome causes: a probe's too, which its guard reports.
func (t *Ticket) SetHeard(heard any) {
	t.heard = heard
	if t.probe != nil {
		t.probe.ticket.heard = heard
	}
}

// Probe reports whether the attempt is a half-open breaker's probe.
func (t *Ticket) Probe() bool { return t.probe != nil }

// SetShared notes what the store answered for the attempt: asked, the
// shared breaker's state and whether the attempt is its probe.
func (t *Ticket) SetShared(sb store.Breaker, asked bool) {
	t.sharedProbe, t.sharedProbeID = sb.Probe, sb.ProbeID
	t.sharedClosed = asked && sb.State == store.Closed
	t.sharedFailures, t.sharedGen = sb.Failures, sb.Gen
}

// OpenedSince reports whether the breaker that admitted the attempt has
// opened since. A probe is what an open breaker lets through, so never;
// an attempt admitted while the breaker was clean costs two atomic loads
// while it stays clean.
func (t *Ticket) OpenedSince() bool {
	if t.b == nil || t.probe != nil {
		return false
	}
	st := &t.entry.State
	if t.fast && st.gen.Load() == t.gen && st.clean.Load() {
		return false
	}
	st.mu.Lock()
	openUntil := st.openUntil
	st.mu.Unlock()
	return !openUntil.IsZero() && time.Until(openUntil) > 0
}

// Sent notes the rate-limit events its key has counted so far, and starts
// a probe's timeout: a probe that hangs past ProbeTimeout counts as a
// failure. A probe waiting to be sent does not hang.
func (t *Ticket) Sent() {
	if t.b == nil {
		return
	}
	t.event = t.entry.State.events.Load()
	if g := t.probe; g != nil {
		timeout := t.b.Config().Rules.ProbeTimeout
		g.timer = time.AfterFunc(timeout, func() {
			g.complete(errProbeTimeout, store.Cause{Detail: fmt.Sprintf("the probe had no answer within %v", timeout)})
		})
	}
}

// Outcome tells the breaker how the attempt went, and releases its entry.
// cause is what a failure will be known by, should it trip the breaker.
// The store is told only what counts here.
func (t *Ticket) Outcome(ctx context.Context, r Result, cause store.Cause) {
	if t.b == nil {
		return
	}
	if r == Success && t.fast && t.b.store == nil {
		// The most common outcome: a success of an attempt a clean
		// breaker let through, with no store to tell. While the breaker
		// stays clean it has nothing to count (lateReport), nor to
		// publish.
		if st := &t.entry.State; st.gen.Load() == t.gen && st.clean.Load() {
			t.b.states.Release(t.entry)
			return
		}
	}
	var result error
	switch r {
	case Failure:
		result = errFailure
	case Excluded:
		result = errExcluded
	}
	t.outcomeShared(ctx, result, cause)
	switch {
	case t.probe != nil:
		t.probe.finish(result, cause) // releases the entry
		t.b.PublishTrip(ctx, t.key, t.entry)
		return
	case t.fast:
		t.lateReport(result, cause)
	default:
		t.report(result, cause)
	}
	t.b.PublishTrip(ctx, t.key, t.entry)
	t.b.states.Release(t.entry)
}

// RateLimitEvent is the result of the attempt's rate-limit refusal, a
// failure: Failure when it is a new event, counted now, Excluded for a
// sibling (see above). lasts is how long the event lasts: the refusal's
// wait hint, at least MinEventLength.
func (t *Ticket) RateLimitEvent(lasts time.Duration) Result {
	if t.b == nil || !t.newEvent(lasts) {
		return Excluded
	}
	return Failure
}

// newEvent reports whether the attempt's rate-limit refusal is a new
// event, and counts it if so: no refusal was counted since the attempt was
// sent, and the hint of the last one counted has run out. Of siblings that
// end at once, one counts. A probe's refusal is always new: a probe is
// sent after the breaker opened.
func (t *Ticket) newEvent(lasts time.Duration) bool {
	st := &t.entry.State
	now := time.Now()
	probe := t.probe != nil || t.sharedProbe
	if !probe && now.UnixNano() < st.eventUntil.Load() {
		return false // sent within the last event's hint
	}
	if probe {
		st.events.Add(1)
	} else if !st.events.CompareAndSwap(t.event, t.event+1) {
		return false // sent before the last event was seen
	}
	st.eventUntil.Store(now.Add(max(lasts, MinEventLength)).UnixNano())
	return true
}

// lateReport tells gobreaker the outcome of a fast attempt, when it must
// count: a failure, or a success after failures. An outcome from before a
// state change is dropped, as gobreaker drops it.
func (t *Ticket) lateReport(result error, cause store.Cause) {
	st := &t.entry.State
	if result == errExcluded || st.gen.Load() != t.gen || result == nil && st.clean.Load() {
		return
	}
	done, err := st.cb.Load().Allow()
	if err == nil {
		late := *t // the caller's ticket keeps its own done
		late.done = done
		late.report(result, cause)
	} else {
		t.b.report(t.key, st, nil)
	}
}

// report tells gobreaker the outcome, keeps the fast path's flag true to
// gobreaker's counts, and reports any state change.
func (t *Ticket) report(result error, cause store.Cause) {
	st := &t.entry.State
	failure := result != nil && result != errExcluded // a failure, or a probe's timeout
	st.mu.Lock()
	if failure {
		st.failures++
		st.pendingFailures++
		st.clean.Store(false)
		st.failing = cause
	}
	failuresBefore := st.failures
	st.mu.Unlock()

	t.done(result)

	if failure {
		st.mu.Lock()
		st.pendingFailures--
		st.mu.Unlock()
	} else if result == nil && !st.clean.Load() && t.settled(failuresBefore) {
		// Counts read only once no failure is on its way to gobreaker, so
		// that they include every failure reported so far.
		counts := st.cb.Load().Counts() // gobreaker's lock, not ours
		st.mu.Lock()
		if st.state == store.Closed && st.pendingFailures == 0 && st.failures == failuresBefore &&
			counts.ConsecutiveFailures == 0 && (t.b.Config().Rules.WindowFailures == 0 || counts.TotalFailures == 0) {
			st.clean.Store(true)
		}
		st.mu.Unlock()
	}
	t.b.report(t.key, st, t.heard)
}

// settled reports whether no failure was reported since failuresBefore,
// nor is being told to gobreaker.
func (t *Ticket) settled(failuresBefore uint64) bool {
	st := &t.entry.State
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pendingFailures == 0 && st.failures == failuresBefore
}

// Cancel withdraws an admitted attempt that will not be sent after all: it
// counts neither way, and gives back the store's probe it holds.
func (t *Ticket) Cancel(ctx context.Context) {
	if t.sharedProbe {
		t.b.ReleaseProbe(ctx, t.key, t.sharedProbeID)
	}
	switch {
	case t.b == nil:
	case t.probe != nil:
		t.probe.finish(errExcluded, store.Cause{}) // releases the entry
	case t.fast:
		t.b.states.Release(t.entry)
	default:
		t.report(errExcluded, store.Cause{})
		t.b.states.Release(t.entry)
	}
	*t = Ticket{}
}

// probeGuard finishes a probe once: with its outcome, or as a failure by
// itself when the probe hangs past ProbeTimeout.
type probeGuard struct {
	ticket Ticket
	timer  *time.Timer
	once   sync.Once
}

// finish is called by the request's goroutine, which set the timer, once
// the probe's outcome is known, or when it is withdrawn unsent.
func (g *probeGuard) finish(result error, cause store.Cause) {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.complete(result, cause)
}

// complete reports the probe's result and releases its entry, the first
// time only; the timer calls it directly.
func (g *probeGuard) complete(result error, cause store.Cause) {
	g.once.Do(func() {
		st := &g.ticket.entry.State
		st.mu.Lock()
		st.probes = max(st.probes-1, 0)
		st.mu.Unlock()
		g.ticket.report(result, cause)
		// Woken once gobreaker has the outcome, so that an attempt that
		// wakes finds the probe's place free.
		st.mu.Lock()
		st.wakeLocked()
		st.mu.Unlock()
		g.ticket.b.states.Release(g.ticket.entry)
	})
}
