package ratewise

import (
	"time"
)

// This file feeds an attempt's outcome back to the layers: the breaker,
// the pause gate and the learned pace.

// feedBack tells the layers how the attempt went: the breaker its outcome,
// the pause gate the server's wait hint. A failed attempt frees its
// concurrency slots at once; a response keeps them until its body closes.
func (c *call) feedBack(rep reply) {
	resp, err, class := rep.resp, rep.err, rep.class
	probed := c.ticket.Probe()
	c.tellBreaker(rep)
	// hint is the server's wait hint on a refusal it is honoured for.
	var hint time.Duration
	now := rep.at // zero when nothing needed the time
	if err == nil && class != Final && !c.policy.IgnoreRetryAfter {
		if rep.hinted && rep.hint > 0 {
			// No hint holds a key longer than the gate's longest pause.
			hint = min(rep.hint, c.t.maxPause())
		}
		if c.t.hintLog != nil {
			c.t.hintLog.check(resp, now, c.host(), c.endpoint)
		}
	}
	// A request a told limit paces teaches only by its refusals: a
	// server that never refuses under the told limit keeps it, to the
	// letter.
	if c.learns && err == nil && (class.refusal() || !c.told && c.sampleQuota(resp)) {
		c.learnUntracked(resp, class, hint)
	}
	c.yielded = err == nil && class.refusal() && c.windowScope != nil && c.yieldWindow()
	// A hint pauses the key's other requests too: all of them when
	// nothing paces the request, else only a hint of more than a second,
	// and not once the key's learned pace has seen its server's hints
	// overstate when its quota comes back, nor when the key's told window
	// yields: its spread answers the hint.
	pausesKey := !c.yielded && hint > 0 && c.t.gate != nil && (hint > time.Second || !c.paced())
	var heldUntil time.Time // a learned window's hold, when later than the hint's
	closed := probed && err == nil && class == Final
	if c.adaptive.n > 0 && now.IsZero() {
		now = time.Now()
	}
	c.adaptive.drain(func(t adaptiveTicket) {
		t.finish(c.ctx, resp, err, class, hint, now)
		if t.fleet != nil {
			// The store holds a learned window for the fleet itself.
			pausesKey = pausesKey && !t.fleet.key.overstate.Load()
		}
		if t.a != nil {
			pausesKey = pausesKey && t.a.HintPausesKey()
			if closed {
				t.a.Pause(now) // the breaker closes: resume gently
			}
			// A window the key learned is held for every transport
			// sharing the gate's store, as a hint's pause is.
			if held := t.a.WindowHeldUntil(); c.t.gate != nil && c.t.gate.Store() != nil && held.After(now) {
				pausesKey, heldUntil = true, held
			}
		}
	})
	if pausesKey {
		c.t.gate.Pause(c.ctx, c.gateKey(), maxTime(now.Add(hint), heldUntil))
	}
	if err != nil {
		c.held.release()
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// yieldWindow makes the told window that gave the refused attempt its
// turn yield (limit.Key.Yield): its key's turns are spread from now on.
// The window stands for the server's quota as a user read it; that the
// server refused it says it counts more strictly, which a spread of the
// same quota answers sooner than the refusal's hint: a sliding-window
// counter asks for the whole window, while it lets the quota's share
// through every Window/Burst. A turn of the spread, refused, is the
// server's to pause as any other.
func (c *call) yieldWindow() bool {
	s, key := c.windowScope, c.windowKey
	e := s.states.Acquire(key, true)
	e.State.told.Yield(time.Now(), s.engine())
	s.states.Release(e)
	return true
}
