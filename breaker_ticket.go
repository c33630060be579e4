package ratewise

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
	"github.com/ratewise/ratewise/internal/keyed"
)

// This file is an attempt's side of its breaker: the ticket that carries
// its outcome back, counted as an event or not, and the probe's guard.
//
// Rate-limit events: a server that runs out of quota refuses every
// request in flight at that moment, and those refusals are one event,
// not one failure each. A key counts the rate-limit failures it has
// counted (events); an attempt notes that count when it is sent, and its
// refusal counts only if no other was counted since: the first refusal
// of a burst counts, its siblings, sent before it was seen, count neither
// way. Nor does a refusal that comes before the wait hint of the last
// event counted ran out: its request did not honour that hint (a hint of
// a second or less is left to the learned pace, which may still be
// searching for the server's rate). Refusals of
// requests sent after one was seen and after its hint, honouring the
// pace, are new events, and those are what trip a breaker. The fast path
// pays one atomic load at the send for this; the refusal path a clock
// reading and a reading of the hint.

// minEventLength is how long a rate-limit event lasts at least, and
// without a wait hint: a second, the shortest wait Retry-After can ask.
const minEventLength = time.Second

// breakerTicket is an admitted attempt whose outcome its breaker awaits.
// It is a value, so an attempt that is no probe allocates nothing for it.
// It holds its key's entry, so the breaker is not evicted under it, until
// the outcome is told or the attempt withdrawn.
type breakerTicket struct {
	b     *breakers // nil: no breaker
	key   string
	entry *keyed.Entry[breakerState]
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
	// heard is the call's own trace's BreakerStateChanged, which hears
	// the changes the attempt's outcome causes; nil for none.
	heard func(BreakerChange)
}

// openedSince reports whether the breaker that admitted the attempt has
// opened since. A probe is what an open breaker lets through, so never;
// an attempt admitted while the breaker was clean costs two atomic loads
// while it stays clean.
func (t breakerTicket) openedSince() bool {
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

// sent notes the rate-limit events its key has counted so far, and starts
// a probe's timeout: a probe that hangs past ProbeTimeout counts as a
// failure. A probe waiting to be sent does not hang.
func (t *breakerTicket) sent() {
	if t.b == nil {
		return
	}
	t.event = t.entry.State.events.Load()
	if g := t.probe; g != nil {
		timeout := t.b.config().policy.ProbeTimeout
		g.timer = time.AfterFunc(timeout, func() {
			g.complete(errProbeTimeout, BreakerCause{Detail: fmt.Sprintf("the probe had no answer within %v", timeout)})
		})
	}
}

// outcome tells the breaker how the attempt went: a failure per IsFailure,
// nothing at all when the call's own context ended it, or when it is a
// rate-limit refusal of an event already counted. The store is told only
// what counts here.
func (t breakerTicket) outcome(c *call, resp *http.Response, err error, class Class) {
	if t.b == nil {
		return
	}
	limited := err == nil && (class.refusal() || resp.StatusCode == http.StatusTooManyRequests)
	isFailure := t.b.config().policy.IsFailure
	var result error
	switch {
	case err != nil && c.ctx.Err() != nil:
		result = errBreakerExcluded
	case isFailure != nil:
		if isFailure(resp, err) {
			result = errBreakerFailure
		}
	case err != nil || limited || resp.StatusCode >= 500:
		result = errBreakerFailure
	}
	if limited && result == errBreakerFailure && !t.newEvent(c, resp) {
		result = errBreakerExcluded // a sibling
	}
	// What a failure that trips the breaker will be known by; successes
	// and siblings, the most of the outcomes, read nothing for it.
	var cause BreakerCause
	if result == errBreakerFailure {
		cause = newBreakerCause(c.req, resp, err, class)
	}
	t.outcomeShared(c, result, cause)
	switch {
	case t.probe != nil:
		t.probe.finish(result, cause) // releases the entry
		t.b.publishTrip(c.ctx, t.key, &t.entry.State)
		return
	case t.fast:
		t.lateReport(result, cause)
	default:
		t.report(result, cause)
	}
	t.b.publishTrip(c.ctx, t.key, &t.entry.State)
	t.b.states.Release(t.entry)
}

// newEvent reports whether the attempt's rate-limit refusal resp is a
// new event, and counts it if so: no refusal was counted since the
// attempt was sent, and the hint of the last one counted has run out. Of
// siblings that end at once, one counts. A probe's refusal is always new:
// a probe is sent after the breaker opened.
func (t breakerTicket) newEvent(c *call, resp *http.Response) bool {
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
	lasts := minEventLength
	if !c.policy.IgnoreRetryAfter {
		if h, ok := headers.WaitHint(resp, now); ok {
			lasts = max(min(h, c.t.maxPause()), minEventLength)
		}
	}
	st.eventUntil.Store(now.Add(lasts).UnixNano())
	return true
}

// lateReport tells gobreaker the outcome of a fast attempt, when it must
// count: a failure, or a success after failures. An outcome from before a
// state change is dropped, as gobreaker drops it.
func (t breakerTicket) lateReport(result error, cause BreakerCause) {
	st := &t.entry.State
	if result == errBreakerExcluded || st.gen.Load() != t.gen || result == nil && st.clean.Load() {
		return
	}
	done, err := st.cb.Load().Allow()
	if err == nil {
		t.done = done
		t.report(result, cause)
	} else {
		t.b.report(t.key, st)
	}
}

// report tells gobreaker the outcome, keeps the fast path's flag true to
// gobreaker's counts, and reports any state change. A failure's cause is
// what the breaker is known to have opened for, should it trip on it.
func (t breakerTicket) report(result error, cause BreakerCause) {
	st := &t.entry.State
	failure := result != nil && result != errBreakerExcluded // a failure, or a probe's timeout
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
		if st.state == BreakerClosed && st.pendingFailures == 0 && st.failures == failuresBefore &&
			counts.ConsecutiveFailures == 0 && (t.b.config().policy.WindowFailures == 0 || counts.TotalFailures == 0) {
			st.clean.Store(true)
		}
		st.mu.Unlock()
	}
	t.b.reportTo(t.key, st, t.heard)
}

// settled reports whether no failure was reported since failuresBefore,
// nor is being told to gobreaker.
func (t breakerTicket) settled(failuresBefore uint64) bool {
	st := &t.entry.State
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.pendingFailures == 0 && st.failures == failuresBefore
}

// cancel withdraws an admitted attempt that will not be sent after all: it
// counts neither way, and gives back the store's probe it holds.
func (t *breakerTicket) cancel(c *call) {
	if t.sharedProbe {
		t.b.releaseProbe(c, t.key, t.sharedProbeID)
	}
	switch {
	case t.b == nil:
	case t.probe != nil:
		t.probe.finish(errBreakerExcluded, BreakerCause{}) // releases the entry
	case t.fast:
		t.b.states.Release(t.entry)
	default:
		t.report(errBreakerExcluded, BreakerCause{})
		t.b.states.Release(t.entry)
	}
	*t = breakerTicket{}
}

// probeGuard finishes a probe once: with its outcome, or as a failure by
// itself when the probe hangs past ProbeTimeout.
type probeGuard struct {
	ticket breakerTicket
	timer  *time.Timer
	once   sync.Once
}

// finish is called by the request's goroutine, which set the timer, once
// the probe's outcome is known, or when it is withdrawn unsent.
func (g *probeGuard) finish(result error, cause BreakerCause) {
	if g.timer != nil {
		g.timer.Stop()
	}
	g.complete(result, cause)
}

// complete reports the probe's result and releases its entry, the first
// time only; the timer calls it directly.
func (g *probeGuard) complete(result error, cause BreakerCause) {
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
