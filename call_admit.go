package ratewise

import (
	"fmt"

	"github.com/ratewise/ratewise/internal/pause"
	"github.com/ratewise/ratewise/internal/scopes"
)

// This file admits an attempt: through its key's breaker, the pause
// gate and every limit scope, in that order, waiting where they say.

// admit takes the attempt through the breaker, the pause gate and every
// limit scope, waiting where they say, within the budget. A layer reads
// the clock only when it has something to time: on a virtual machine a
// reading can cost more than a whole layer's bookkeeping.
func (c *call) admit() error {
	for {
		if c.t.admitStore != nil {
			c.prefetch()
		}
		if c.t.breakers != nil {
			if err := c.admitBreaker(); err != nil {
				return err
			}
		}
		waited := c.waited
		if err := c.admitLimits(); err != nil {
			return err
		}
		// The breaker may have opened while this attempt queued in the
		// gate or a scope: then it is not sent, and meets the breaker
		// again, as an attempt that came now would. One that did not wait
		// met it just now.
		if c.t.breakers == nil || c.waited == waited || !c.ticket.OpenedSince() {
			return nil
		}
		c.withdraw()
		c.ticket.Cancel(c.ctx)
	}
}

// admitLimits takes the attempt through the pause gate and every limit
// scope, waiting again when a pause began while it queued.
func (c *call) admitLimits() error {
	t := c.t
	for {
		if g := t.gate; g != nil && !g.Idle() {
			if err := c.waitPause(g, c.gateKey()); err != nil {
				c.ticket.Cancel(c.ctx)
				return err
			}
		}
		if err := c.admitScopes(); err != nil {
			c.ticket.Cancel(c.ctx)
			return err
		}
		// A refusal seen while this attempt queued in a scope pauses it
		// too: give the slots back and wait the pause out.
		if t.gate == nil || t.gate.Idle() || !t.gate.Paused(c.gateKey()) {
			return nil
		}
		c.withdraw()
	}
}

// withdraw gives back what the scopes granted an attempt that will not be
// sent now: its concurrency slots and its adaptive turns.
func (c *call) withdraw() {
	c.held.release()
	c.adaptive.drain(scopes.Ticket.Cancel)
	c.answerProbe(false)
}

// answerProbe tells the told window whose probe the attempt is how it
// went: let through (ok), or not (not sent, or failed), once.
func (c *call) answerProbe(ok bool) {
	if c.windowProbe {
		c.windowProbe = false
		c.window.ProbeAnswered(c.windowKey, ok)
	}
}

// admitScopes takes the attempt through every limit scope in turn, in
// the order given. A request a told limit paces meets the LearnedScope New
// added first, though: when it waits for the pace learned under the told
// limits, it takes its turns of them after, as it is sent, so that they
// hold to the letter.
func (c *call) admitScopes() error {
	all := c.t.scopes()
	if len(all) == 1 && all[0] == c.t.learned {
		return c.admitLearnedAlone(all[0])
	}
	c.readTold(all)
	c.learns, c.window, c.windowProbe = false, nil, false
	var first *scope // the LearnedScope, under told limits
	if c.told.On {
		first = c.t.learned
	}
	r := c.scopeRequest() // made here, out of the loop: it stays on the stack
	if first != nil {
		if err := c.throughScope(&r, first); err != nil {
			return err
		}
	}
	for _, s := range all {
		if s == first {
			continue
		}
		if err := c.throughScope(&r, s); err != nil {
			return err
		}
	}
	return nil
}

// admitLearnedAlone is admitScopes for a transport whose one scope is
// the LearnedScope New added, as New(base) makes it: no told limit, and
// nothing to ask of a key that learned nothing.
func (c *call) admitLearnedAlone(s *scope) error {
	c.told, c.learns, c.window, c.windowProbe = scopes.Told{}, true, nil, false
	key := s.key(c.req)
	if s.Unpaced(key) {
		return nil
	}
	r := c.scopeRequest()
	return c.admitScope(&r, s, key)
}

// throughScope takes the attempt through scope s, when s applies to it.
// A key that learned nothing is passed over here, as Admit would, without
// the call: it is most requests of a learning scope.
func (c *call) throughScope(r *scopes.Request, s *scope) error {
	if !s.appliesTo(c.req) {
		return nil // not a request this scope limits
	}
	c.learns = c.learns || s.Adaptive()
	key := s.key(c.req)
	if s.Unpaced(key) {
		return nil
	}
	return c.admitScope(r, s, key)
}

// admitScope takes the attempt through scope s under key, keeping what s
// grants it. r is what the scopes take of the call.
func (c *call) admitScope(r *scopes.Request, s *scope, key string) error {
	g, err := s.Admit(r, key)
	if err != nil {
		c.withdraw()
		return limitError(err)
	}
	if g.Ticket.Held() {
		c.adaptive.add(g.Ticket)
	}
	if g.Slot.Held() {
		c.held.add(g.Slot)
	}
	if g.Window {
		c.window, c.windowKey, c.windowProbe, c.windowStart = s, key, g.Probe, g.WindowStart
	}
	return nil
}

// scopeRequest is what the scopes take of the call: its context,
// priority, told limits and prefetched answers, and its waits.
func (c *call) scopeRequest() scopes.Request {
	return scopes.Request{Ctx: c.context, Priority: int(c.priority), Low: c.priority < PriorityNormal, Told: c.told,
		Pre: c.pre, Sent: c.sent, Wait: c.scopeWait, Left: c.budgetLeft}
}

// scopeWait waits as a scope asks, traced under the scope's name.
func (c *call) scopeWait(w scopes.Wait) error {
	kind := WaitPacing
	if w.Kind == scopes.WaitSlot {
		kind = WaitConcurrency
	}
	c.scopeName = w.Scope
	defer func() { c.scopeName = "" }()
	if w.Open {
		return c.waitUntil(w.Ready, w.Until, kind, w.Expected)
	}
	return c.waitAdmissionOr(w.D, kind, w.Ready)
}

// paced reports whether a scope that applies to the request paces it, by
// a told pace or a learned one.
func (c *call) paced() bool { return c.told.On || c.learns }

// readTold notes whether a told limit among all paces the request, and
// the fastest such pace, before any scope admits it: the learned scope,
// first, learns under them.
func (c *call) readTold(all []*scope) {
	c.told = scopes.Told{}
	for _, s := range all {
		if !s.Adaptive() && s.appliesTo(c.req) {
			c.told.Add(s.Config())
		}
	}
}

// gateKey is the request's key in the pause gate, computed once a call.
func (c *call) gateKey() string {
	if !c.gateKeyed {
		c.gateKeyV, c.gateKeyed = c.t.gate.Key(c.req), true
	}
	return c.gateKeyV
}

// holds is a short list of what an attempt holds until its answer:
// concurrency slots, adaptive tickets. Two fit inline, so that holding
// them allocates nothing and the call that keeps them stays on the stack.
type holds[T any] struct {
	inline [2]T
	n      int
	more   []T
}

func (h *holds[T]) add(v T) {
	if h.n < len(h.inline) {
		h.inline[h.n] = v
	} else {
		h.more = append(h.more, v)
	}
	h.n++
}

// at is the i-th of those held.
func (h *holds[T]) at(i int) T {
	if i < len(h.inline) {
		return h.inline[i]
	}
	return h.more[i-len(h.inline)]
}

// drain calls f for every one held, then forgets them.
func (h *holds[T]) drain(f func(T)) {
	for i := range min(h.n, len(h.inline)) {
		f(h.inline[i])
	}
	for _, v := range h.more {
		f(v)
	}
	*h = holds[T]{}
}

// find returns the first of those held that f holds for, and whether
// there is one.
func (h *holds[T]) find(f func(T) bool) (T, bool) {
	for i := range min(h.n, len(h.inline)) {
		if f(h.inline[i]) {
			return h.inline[i], true
		}
	}
	for _, v := range h.more {
		if f(v) {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// waitPause waits out key's pause in g, if any, looking again after each
// wait: another refusal may have pushed it further. A store that fails
// closed refuses the request with a *ClientLimitError.
func (c *call) waitPause(g *gate, key string) error {
	for {
		asked, ok := c.pre.PauseAnswer(key)
		d, left, err := g.Wait(c.ctx, key, asked, ok)
		if closed, isClosed := err.(*pause.StoreClosedError); isClosed {
			return &ClientLimitError{Scope: "pause", Key: key, Reason: LimitStoreUnavailable, Err: closed.Err}
		}
		if err != nil || d == 0 {
			return err
		}
		if err := c.waitAdmission(d, WaitPause); err != nil {
			return fmt.Errorf("ratewise: %s is paused for %v at the server's request: %w", key, left, err)
		}
	}
}
