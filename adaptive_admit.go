package ratewise

import (
	"net/http"
	"time"
)

// This file ties the adaptive pacer into the attempt loop: admission in a
// scope, and the tickets that carry each serverAnswer back.

// admitAdaptive waits for the request's turn in an adaptive scope: its
// place in the key's line, then, at the head, room in the slow start or
// its place in the pace. It returns the number the request is sent
// under.
func (s *scope) admitAdaptive(c *call, key string, st *scopeState, deadline time.Time, l *Limit) (uint64, error) {
	a := st.adapt
	now := time.Now()
	if seq, sent := a.takeAlone(now); sent {
		return seq, nil
	}
	expected, known := a.join(now)
	defer a.leave()
	if expected > 0 || !known {
		if err := s.enqueue(st, key, expected, now, deadline, l); err != nil {
			return 0, err
		}
		defer st.dequeue()
	}
	select {
	case <-a.head: // nobody ahead: no timer needed
	default:
		if err := c.waitUntil(a.head, deadline, WaitPacing, expected); err != nil {
			return 0, s.waitError(err, key, deadline, c)
		}
		now = time.Now()
	}
	defer func() { a.head <- struct{}{} }()
	for first := true; ; first = false {
		if !first {
			now = time.Now()
		}
		seq, delay, ready, sent := a.take(now)
		switch {
		case sent:
			return seq, nil
		case delay == 0:
			if err := c.waitUntil(ready, deadline, WaitPacing, 0); err != nil {
				return 0, s.waitError(err, key, deadline, c)
			}
		default:
			if !deadline.IsZero() && now.Add(delay).After(deadline) {
				return 0, &LimitError{Scope: s.name, Key: key, Reason: "max-wait", RetryIn: delay}
			}
			// An answer may come first and say the request may go sooner.
			if err := c.waitAdmissionOr(delay, WaitPacing, ready); err != nil {
				return 0, err
			}
		}
	}
}

// waitError is the error of a wait for a turn that ended early: a
// *LimitError when MaxWait ran out, else err.
func (s *scope) waitError(err error, key string, deadline time.Time, c *call) error {
	if !deadline.IsZero() && !time.Now().Before(deadline) && c.ctx.Err() == nil {
		return &LimitError{Scope: s.name, Key: key, Reason: "max-wait"}
	}
	return err
}

// adaptiveTicket is a request admitted by an adaptive scope, whose serverAnswer
// the scope awaits.
type adaptiveTicket struct {
	scope *scope
	entry *keyedEntry[scopeState]
	seq   uint64 // the request's number in its key
}

// finish tells the scope how the request went, and releases its entry.
func (t adaptiveTicket) finish(resp *http.Response, err error, class Class, now time.Time) {
	t.entry.state.adapt.outcome(t.seq, readAnswer(resp, err, class, now), now)
	t.scope.states.release(t.entry)
}

// cancel withdraws a request that will not be sent.
func (t adaptiveTicket) cancel() {
	t.entry.state.adapt.cancel()
	t.scope.states.release(t.entry)
}

// adaptiveTickets are the tickets an attempt holds, one per adaptive
// scope.
type adaptiveTickets = holds[adaptiveTicket]
