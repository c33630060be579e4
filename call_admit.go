package ratewise

// This file admits an attempt: through its key's breaker, the cooldown
// gate and every limit scope, in that order, waiting where they say.

// admit takes the attempt through the breaker, the cooldown gate and every
// limit scope, waiting where they say, within the budget. A layer reads
// the clock only when it has something to time: on a virtual machine a
// reading can cost more than a whole layer's bookkeeping.
func (c *call) admit() error {
	for {
		if err := c.admitBreaker(); err != nil {
			return err
		}
		if err := c.admitLimits(); err != nil {
			return err
		}
		// The breaker may have opened while this attempt queued in the
		// gate or a scope: then it is not sent, and meets the breaker
		// again, as an attempt that came now would.
		if !c.ticket.openedSince() {
			return nil
		}
		c.withdraw()
		c.ticket.cancel(c)
	}
}

// admitBreaker takes the attempt through its key's breaker, waiting out
// an open one if the budget allows.
func (c *call) admitBreaker() error {
	t := c.t
	if t.breakers == nil {
		return nil
	}
	key := t.breakers.key(c.req)
	e := t.breakers.acquire(key)
	ticket, err := t.breakers.admit(c, key, e)
	if err != nil {
		t.breakers.states.Release(e)
		return err
	}
	c.ticket = ticket // holds e until the outcome
	return nil
}

// admitLimits takes the attempt through the cooldown gate and every limit
// scope, waiting again when a pause began while it queued.
func (c *call) admitLimits() error {
	t := c.t
	for {
		if g := t.gate; g != nil && !g.idle() {
			if err := g.admit(c, c.gateKey()); err != nil {
				c.ticket.cancel(c)
				return err
			}
		}
		if err := c.admitScopes(); err != nil {
			c.ticket.cancel(c)
			return err
		}
		// A refusal seen while this attempt queued in a scope pauses it
		// too: give the slots back and wait the pause out.
		if t.gate == nil || t.gate.idle() || !t.gate.paused(c.gateKey()) {
			return nil
		}
		c.withdraw()
	}
}

// withdraw gives back what the scopes granted an attempt that will not be
// sent now: its concurrency slots and its adaptive turns.
func (c *call) withdraw() {
	c.held.release()
	c.adaptive.drain(adaptiveTicket.cancel)
}

// admitScopes takes the attempt through every limit scope in turn.
func (c *call) admitScopes() error {
	c.paced, c.told = false, false
	for _, s := range c.t.scopes() {
		if s.applies != nil && !s.applies(c.req) {
			continue // not a request this scope limits
		}
		if s.adaptive {
			c.paced = true
		} else if s.limit().paces() {
			c.paced, c.told = true, true
		}
		key := s.key(c.req)
		if s.lazy() && s.answered(key) {
			continue // an adaptive scope's key that has learned nothing: unpaced
		}
		e := s.states.Acquire(key, true)
		seq, slotted, starting, err := s.admit(c, key, &e.State)
		if err != nil {
			s.states.Release(e)
			c.withdraw()
			return err
		}
		if seq != 0 || starting {
			s.states.Hold(e) // one hold for the ticket, until the answer
			t := adaptiveTicket{scope: s, entry: e, a: e.State.adapt.Load(), seq: seq}
			if starting {
				t.a, t.startKey = nil, key
			}
			c.adaptive.add(t)
		}
		if slotted {
			c.held.add(heldSlot{scope: s, entry: e})
		} else {
			s.states.Release(e)
		}
	}
	return nil
}

// gateKey is the request's key in the cooldown gate, computed once a call.
func (c *call) gateKey() string {
	if !c.gateKeyed {
		c.gateKeyV, c.gateKeyed = c.t.gate.Key(c.req), true
	}
	return c.gateKeyV
}
