package ratewise

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/store"
)

// This file is a call's side of its breaker: the engine
// (internal/breaker) says what an attempt must do, and the call waits
// within its budget, or refuses with a *CircuitOpenError; the call reads
// each outcome by the policy and tells it through the attempt's ticket.

// breakers is BreakerPolicy at work: the engine, and what of the policy
// the call reads.
type breakers struct {
	*breaker.Breakers
	key    KeyFunc                       // fixed for the transport's life
	policy atomic.Pointer[BreakerPolicy] // defaults filled in; SetBreakerPolicy replaces it
}

func newBreakers(p BreakerPolicy) *breakers {
	b := &breakers{key: p.Key, Breakers: breaker.New(engineConfig(p, nil), p.Store, idleTimeout(p.IdleTimeout))}
	b.policy.Store(&p)
	return b
}

// engineConfig is p, defaults filled in, as the engine takes it; notify
// hears every change.
func engineConfig(p BreakerPolicy, notify func(BreakerChange)) breaker.Config {
	return breaker.Config{Rules: p.Rules(), HalfOpenProbes: p.HalfOpenProbes, SuccessesToClose: p.SuccessesToClose,
		Notify: engineNotify(notify), Hear: hearChange}
}

// engineNotify is notify as the engine's Config.Notify; nil for nil.
func engineNotify(notify func(BreakerChange)) func(breaker.Change) {
	if notify == nil {
		return nil
	}
	return func(c breaker.Change) { notify(changeFromEngine(c)) }
}

// hearChange tells heard, a call's trace's BreakerStateChanged, of c.
func hearChange(heard any, c breaker.Change) { heard.(func(BreakerChange))(changeFromEngine(c)) }

// changeFromEngine is the engine's change as a BreakerChange.
func changeFromEngine(c breaker.Change) BreakerChange {
	return BreakerChange{Key: c.Key, From: BreakerState(c.From), To: BreakerState(c.To), Level: c.Level,
		OpenedAt: c.OpenedAt, Cause: causeFromStore(c.Cause), ResetIn: c.ResetIn}
}

// config is the policy in force.
func (b *breakers) config() *BreakerPolicy { return b.policy.Load() }

// admitBreaker takes the attempt through its key's breaker: the one its
// store shares, then this transport's. While one is open it waits for the
// reset when that fits the call's budget, else refuses the call with a
// *CircuitOpenError. The ticket takes the attempt's outcome.
func (c *call) admitBreaker() error {
	b := c.t.breakers
	if b == nil {
		return nil
	}
	key := b.key(c.req)
	if b.TryClean(&c.ticket, key) {
		c.hearBreaker()
		return nil
	}
	e := b.Acquire(key)
	var shared store.Breaker
	var asked bool
	if b.Store() != nil {
		var err error
		if shared, asked, err = c.admitShared(b, key); err != nil {
			b.Release(e)
			return err
		}
	}
	if err := c.admitLocal(b, key, e); err != nil {
		if shared.Probe {
			b.ReleaseProbe(c.ctx, key, shared.ProbeID)
		}
		b.PublishTrip(c.ctx, key, e) // told again, if telling it failed
		b.Release(e)
		return err
	}
	// c.ticket holds e until the outcome. Without a store, what it would
	// note is what TryLocal's fresh ticket holds already.
	if asked {
		c.ticket.SetShared(shared, asked)
	}
	c.hearBreaker()
	return nil
}

// hearBreaker makes the call's trace hear the breaker changes its
// attempt's outcome causes, when it listens.
func (c *call) hearBreaker() {
	if c.trace != nil && c.trace.BreakerStateChanged != nil {
		c.ticket.SetHeard(c.trace.BreakerStateChanged) // no closure: see hearChange
	}
}

// admitLocal lets an attempt through this transport's breaker for key,
// its ticket in c.ticket.
func (c *call) admitLocal(b *breakers, key string, e *breaker.Entry) error {
	for {
		v := b.TryLocal(&c.ticket, key, e)
		var err error
		switch {
		case v.Go:
			return nil
		case v.OpenFor > 0:
			err = c.waitBreakerReset(key, v.OpenFor, v.Failures)
		case v.Woken != nil:
			err = c.waitProbes(key, v.Woken, v.Failures)
		case v.Refused:
			err = &CircuitOpenError{Key: key, State: BreakerOpen, Failures: v.Failures}
		}
		if err != nil {
			return err
		}
	}
}

// admitShared lets an attempt through the breaker the store shares, when
// there is one: an open one waits or refuses as a local one does; a
// half-open one lets its one probe through, and the others wait for its
// outcome, asking the store again, as long as the budget lasts. It
// reports asked false when there is no store, or it failed: that leaves
// the local breaker alone to decide, unless the store fails closed.
func (c *call) admitShared(b *breakers, key string) (sb store.Breaker, asked bool, err error) {
	if b.Store() == nil {
		return store.Breaker{}, false, nil
	}
	poll := breaker.SharedProbePoll
	for {
		pre, ok := c.pre.BreakerAnswer(key)
		sb, err = b.AskShared(c.ctx, key, pre, ok)
		switch {
		case err != nil && c.ctx.Err() != nil:
			return sb, false, c.ctx.Err()
		case err != nil && store.FailsClosed(err):
			return sb, false, &CircuitOpenError{Key: key, State: BreakerOpen, Err: err}
		case err != nil:
			return store.Breaker{}, false, nil
		case sb.State == store.HalfOpen && !sb.Probe:
			// Another transport probes: ask again in a while.
			d := min(poll, c.budgetLeft())
			if d <= 0 || b.config().FailFast || c.waitAdmission(d, WaitBreaker) != nil {
				if err := c.ctx.Err(); err != nil {
					return sb, true, err
				}
				return sb, true, &CircuitOpenError{Key: key, State: BreakerHalfOpen, Failures: sb.Failures}
			}
			poll = min(2*poll, breaker.MaxSharedProbePoll)
			continue
		case sb.State != store.Open:
			return sb, true, nil
		}
		resetIn := time.Until(sb.Until)
		if resetIn <= 0 {
			continue // over while we asked: ask again, for the probe
		}
		if err := c.waitBreakerReset(key, resetIn, 0); err != nil {
			return sb, true, err
		}
	}
}

// waitBreakerReset waits out an open breaker's resetIn, or, when that does
// not fit or the policy fails fast, refuses the call with the breaker's
// error.
func (c *call) waitBreakerReset(key string, resetIn time.Duration, fails int) error {
	if c.t.breakers.config().FailFast {
		return &CircuitOpenError{Key: key, State: BreakerOpen, ResetIn: resetIn, Failures: fails}
	}
	err := c.waitAdmission(resetIn, WaitBreaker)
	if err == nil || c.ctx.Err() != nil {
		return err
	}
	return &CircuitOpenError{Key: key, State: BreakerOpen, ResetIn: resetIn, Failures: fails}
}

// waitProbes waits, within the call's budget, until woken: the half-open
// breaker's probes in flight are done or one of them is given back, or
// the breaker changes. When the budget (or the context's deadline) runs
// out first, or the policy fails fast, it refuses the call, half-open.
func (c *call) waitProbes(key string, woken <-chan struct{}, fails int) error {
	if c.budgetLeft() > 0 && !c.t.breakers.config().FailFast {
		err := c.waitUntil(woken, time.Time{}, WaitBreaker, 0)
		if err == nil || c.ctx.Err() != nil {
			return err
		}
	}
	return &CircuitOpenError{Key: key, State: BreakerHalfOpen, Failures: fails}
}

// failsByDefault reports whether resp counts as a failure to a breaker
// with no IsFailure: a refusal (limited) or a 5xx.
func failsByDefault(resp *http.Response, limited bool) bool {
	return limited || resp.StatusCode >= 500
}

// tellSuccess tells t, the ticket of an attempt answered with resp, a
// Final response, a success, when resp is one to b by default, and
// reports whether it told. A failure, or a policy whose IsFailure
// decides, is left for the call to read (tellBreaker), which calls
// IsFailure once.
func (b *breakers) tellSuccess(t *breaker.Ticket, ctx context.Context, resp *http.Response) bool {
	if b.config().IsFailure != nil || failsByDefault(resp, resp.StatusCode == http.StatusTooManyRequests) {
		return false
	}
	t.Outcome(ctx, breaker.Success, store.Cause{})
	return true
}

// tellBreaker tells the attempt's breaker how it went: a failure per
// IsFailure, nothing at all when the call's own context ended it. A
// rate-limit refusal counts once per event (see [BreakerPolicy]): its
// event lasts the server's wait hint, when honoured.
func (c *call) tellBreaker(rep *reply) {
	resp, err, class := rep.resp, rep.err, rep.class
	t := &c.ticket
	b := c.t.breakers
	if b == nil || !t.Admitted() {
		return
	}
	limited := err == nil && (class.refusal() || resp.StatusCode == http.StatusTooManyRequests)
	isFailure := b.config().IsFailure
	result := breaker.Success
	switch {
	case err != nil && c.ctx.Err() != nil:
		result = breaker.Excluded
	case isFailure != nil:
		if isFailure(resp, err) {
			result = breaker.Failure
		}
	case err != nil || failsByDefault(resp, limited):
		result = breaker.Failure
	}
	if limited && result == breaker.Failure {
		result = t.RateLimitEvent(c.honouredHint(rep)) // the event lasts as long as its hint
	}
	// What a failure that trips the breaker will be known by; successes
	// and siblings, the most of the outcomes, read nothing for it.
	var cause store.Cause
	if result == breaker.Failure {
		cause = newBreakerCause(c.req, resp, err, class).forStore()
	}
	t.Outcome(c.ctx, result, cause)
	*t = breaker.Ticket{}
}
