package ratewise

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
)

// This file ties the learned pace (internal/learn) into the attempt loop:
// admission in a scope, and the tickets that carry each answer back.

// learnedTurn is how an adaptive scope let a request go: the number it
// is sent under when paced, by the scope's own pace or by the store's
// (fleet); or in its key's slow start.
type learnedTurn struct {
	seq      uint64
	starting bool
	fleet    *fleetTurn
}

// admitLearned waits for the request's turn in an adaptive scope. A key
// that has learned something is paced by it: by what the fleet learned,
// when the transport's store keeps it (admitShared), else by what this
// transport learned (admitAdaptive). One that has not opens up by slow
// start (see admitStarting), then, its slow start done with no rate-limit
// signal, goes unpaced. A request paced by a told limit needs no slow
// start: the limit says what the first requests may take.
func (s *scope) admitLearned(c *call, key string, st *scopeState, deadline time.Time, l *Limit) (learnedTurn, error) {
	for {
		inStore := false
		if c.t.learnStore != nil {
			turn, got, err := s.admitShared(c, key, st, deadline, l)
			switch {
			case err != nil || got == sharedTurn:
				return turn, err
			case got == sharedUnpaced && !pacedFromStart(l):
				// The store answers for the fleet, which learned nothing:
				// what this transport learned while the store was away is
				// gone.
				inStore = true
				if a := st.adapt.Load(); a != nil && !a.Busy() {
					st.adapt.CompareAndSwap(a, nil)
				}
			}
		}
		turn, askStore, err := s.admitOwn(c, key, st, deadline, l, inStore)
		if !askStore {
			return turn, err
		}
		// The fleet learned a pace while the request waited in slow
		// start: it asks the store for its turn.
	}
}

// admitOwn is admitLearned without the fleet's pace: the request is paced
// by what this transport learned of key, or goes in its slow start.
// inStore says the store answered that the fleet learned nothing of key;
// askStore is then set when, the request waiting in slow start, the
// fleet learned a pace.
func (s *scope) admitOwn(c *call, key string, st *scopeState, deadline time.Time, l *Limit, inStore bool) (turn learnedTurn, askStore bool, err error) {
	for {
		a := st.adapt.Load()
		if inStore {
			a = nil
		}
		if a != nil && c.told && st.toldGen.Load() != c.t.toldGen.Load() && st.adapt.CompareAndSwap(a, nil) {
			// Learned under told limits that were told anew since: they
			// are trusted again, until the server refuses under them.
			a = nil
		}
		if a == nil && pacedFromStart(l) {
			a = s.arm(key, st, time.Now())
		}
		switch {
		case a != nil && c.told:
			// Paced below told limits: their FailFast and MaxWait bound
			// the wait as much as their own turns.
			under := *l
			under.FailFast = l.FailFast || c.toldFailFast
			if w := c.toldMaxWait; w > 0 && (under.MaxWait == 0 || w < under.MaxWait) {
				under.MaxWait = w
				if d := time.Now().Add(w); deadline.IsZero() || d.Before(deadline) {
					deadline = d
				}
			}
			seq, err := s.admitAdaptive(c, key, a, st, deadline, &under)
			return learnedTurn{seq: seq}, false, err
		case a != nil:
			seq, err := s.admitAdaptive(c, key, a, st, deadline, l)
			return learnedTurn{seq: seq}, false, err
		case c.told:
			// Paced by a told limit, which says what the first wave may
			// take: unpaced until a refusal, and no state looked up meanwhile.
			s.markAnswered(key)
			return learnedTurn{}, false, nil
		case s.answered(key) || !s.lazy():
			return learnedTurn{}, false, nil
		}
		wake := s.admitStarting(c, st, inStore)
		if wake == nil {
			return learnedTurn{starting: true}, false, nil
		}
		if err := c.waitUntil(wake, deadline, WaitPacing, 0); err != nil {
			return learnedTurn{}, false, s.waitError(err, key, deadline, c)
		}
		if inStore && s.pacedInStore(st) {
			return learnedTurn{}, true, nil
		}
	}
}

// admitStarting lets a request of a key in slow start (learn.Start) go,
// when the key has room in flight for one more, and returns nil.
// Otherwise it returns a channel closed at the next answer of the key's
// slow start, which may make room, or arm its pace; one already closed
// when the pace was armed since the caller looked.
//
// inStore says the key's learned pace is the fleet's, kept by the store,
// which answered that nothing is learned yet: a pace this transport
// learned meanwhile does not end the slow start; one the fleet learned
// does (the store answered paced to a refusal this transport told it).
// Left in slow start, each request waiting would be let go by the
// refusal of the one before it: against a full queue, a whole wave
// refused in an instant.
func (s *scope) admitStarting(c *call, st *scopeState, inStore bool) <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if inStore && s.pacedInStore(st) || !inStore && st.adapt.Load() != nil {
		return closedChan
	}
	others, wait := st.start.Enter()
	if wait == nil {
		c.startOthers = others
	}
	return wait
}

// closedChan is a channel closed from the start.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// keyHash is key's hash in the answered slots (learn.Answered): odd, so
// never 0 (an empty slot) nor what a learning key leaves there.
func (s *scope) keyHash(key string) uint64 {
	return s.states.Hash(key) | 1
}

// answered reports whether key's slow start ended with nothing learned,
// as far as the answered slots remember: it then goes unpaced without a
// look at its state.
func (s *scope) answered(key string) bool { return s.answeredKeys.Has(s.keyHash(key)) }

// learning marks key's answered slot: the key has learned something, and
// its requests look up what.
func (s *scope) learning(key string) { s.answeredKeys.Learning(s.keyHash(key)) }

// endStarting ends a request of the slow start of the key whose state st
// is, sent with others of the key in flight (-1 for one not sent). A slow
// start that reaches learn.StartDone with nothing learned marks the key
// answered.
func (s *scope) endStarting(st *scopeState, key string, succeeded bool, others int) {
	st.mu.Lock()
	done := st.start.End(succeeded, others)
	if a := st.adapt.Load(); a != nil {
		a.Unpaced(succeeded, others) // the pace was armed while it was on its way
	}
	st.mu.Unlock()
	if done && st.adapt.Load() == nil {
		s.markAnswered(key)
	}
}

// markAnswered marks key's answered slot: the key has learned nothing and
// needs no slow start, and its requests go unpaced without a look at its
// state.
func (s *scope) markAnswered(key string) { s.answeredKeys.Mark(s.keyHash(key)) }

// admitAdaptive waits for the request's turn in an adaptive scope: its
// place in the key's line, then, at the head, its place in the pace, or
// room in the count or the window the key learned. It returns the number
// the request is sent under.
func (s *scope) admitAdaptive(c *call, key string, a *learn.Pacer, st *scopeState, deadline time.Time, l *Limit) (uint64, error) {
	now := time.Now()
	if seq, sent := a.TakeAlone(now); sent {
		return seq, nil
	}
	expected, known := a.Join(now)
	defer a.Leave()
	if expected > 0 || !known {
		cfg := engineLimit(l) // the told limits' FailFast and MaxWait, when under them
		if err := st.told.Enqueue(expected, now, deadline, &cfg); err != nil {
			return 0, s.refusal(key, err)
		}
		defer st.told.Dequeue()
	}
	head := a.Head()
	select {
	case <-head: // nobody ahead: no timer needed
	default:
		if err := c.waitUntil(head, deadline, WaitPacing, expected); err != nil {
			return 0, s.waitError(err, key, deadline, c)
		}
		now = time.Now()
	}
	defer a.ReleaseHead()
	for first := true; ; first = false {
		if !first {
			now = time.Now()
		}
		seq, delay, ready, sent := a.Take(now)
		switch {
		case sent:
			return seq, nil
		case delay == 0:
			if err := c.waitUntil(ready, deadline, WaitPacing, 0); err != nil {
				return 0, s.waitError(err, key, deadline, c)
			}
		default:
			if !deadline.IsZero() && now.Add(delay).After(deadline) {
				return 0, &ClientLimitError{Scope: s.name, Key: key, Reason: LimitMaxWait, RetryIn: delay}
			}
			// An answer may come first and say the request may go sooner.
			if err := c.waitAdmissionOr(delay, WaitPacing, ready); err != nil {
				return 0, err
			}
		}
	}
}

// waitError is the error of a wait for a turn that ended early: a
// *ClientLimitError when MaxWait ran out, else err.
func (s *scope) waitError(err error, key string, deadline time.Time, c *call) error {
	if !deadline.IsZero() && !time.Now().Before(deadline) && c.ctx.Err() == nil {
		return &ClientLimitError{Scope: s.name, Key: key, Reason: LimitMaxWait}
	}
	return err
}

// adaptiveTicket is a request admitted by an adaptive scope, whose answer
// the scope awaits.
type adaptiveTicket struct {
	scope *scope
	entry *keyed.Entry[scopeState]
	a     *learn.Pacer // what the scope learned of the request's key; nil in slow start
	seq   uint64       // the request's number in its key
	// fleet is set for a turn of the fleet's pace a store keeps (see
	// limit_shared.go); out of the ticket, which every call holds inline,
	// since only a call through a store needs it.
	fleet *fleetTurn
	// startKey is the key of a request sent in its key's slow start, and
	// startOthers how many of the key's were in flight when it was.
	startKey    string
	startOthers int
}

// finish tells the scope how the request went, and releases its entry.
// The answer to a request of a slow start, learned from as any unpaced
// request's is (learnUntracked), makes room for the key's next ones.
func (t adaptiveTicket) finish(ctx context.Context, resp *http.Response, err error, class Class, hint time.Duration, now time.Time) {
	switch {
	case t.fleet != nil:
		t.tellShared(ctx, resp, err, class, hint, now)
	case t.a == nil:
		ok := err == nil && !class.refusal() && resp.StatusCode >= 200 && resp.StatusCode <= 299
		t.scope.endStarting(&t.entry.State, t.startKey, ok, t.startOthers)
	default:
		an := readAnswer(resp, err, class, now)
		an.Hint = hint
		t.a.Outcome(t.seq, an, now)
	}
	t.scope.states.Release(t.entry)
}

// cancel withdraws a request that will not be sent.
func (t adaptiveTicket) cancel() {
	switch {
	case t.fleet != nil:
		// A turn of the fleet's pace not used is spent, as a bucket's.
	case t.a == nil:
		t.scope.endStarting(&t.entry.State, t.startKey, false, -1)
	default:
		t.a.Cancel()
	}
	t.scope.states.Release(t.entry)
}

// arm returns what the scope learned of key, whose state st is, making
// it on the key's first rate-limit signal.
func (s *scope) arm(key string, st *scopeState, now time.Time) *learn.Pacer {
	if a := st.adapt.Load(); a != nil {
		return a
	}
	l := s.limit()
	a := learn.New(float64(l.StartRate), adaptiveCeiling(l), now)
	if s.learnTrace != nil {
		a.SetTrace(s.learnTrace)
	}
	st.mu.Lock() // the slow start's successes so far, none missed nor counted twice
	if !st.adapt.CompareAndSwap(nil, a) {
		st.mu.Unlock()
		return st.adapt.Load()
	}
	a.Adopt(st.start.Passed(), st.start.Out(), st.start.OKFlight())
	st.mu.Unlock()
	s.learning(key)
	return a
}

// readAnswer reads a response for the learned pace: its outcome, by the
// class it was given, and the count of the server's quota its headers
// carry (see [learn.ReadAnswer]). A request that got no response tells
// neither.
func readAnswer(resp *http.Response, err error, class Class, now time.Time) learn.Answer {
	if err != nil {
		return learn.Answer{Remaining: -1, Flight: -1}
	}
	return learn.ReadAnswer(resp, class.refusal(), now)
}

// learnUntracked tells every adaptive scope the request passed unpaced
// (its key had learned nothing when it was admitted) of a rate-limit
// signal in its answer: a refusal, or a count of the server's quota. The
// key's learning starts with it. hint is the refusal's wait hint.
func (c *call) learnUntracked(resp *http.Response, class Class, hint time.Duration) {
	now := time.Now()
	an := readAnswer(resp, nil, class, now)
	an.Hint = hint
	if !an.Refused && an.Remaining < 0 {
		return // no signal after all
	}
	for _, s := range c.t.scopes() {
		if !s.adaptive || s.applies != nil && !s.applies(c.req) {
			continue // not a scope that learns of this request
		}
		ticket, held := c.adaptive.find(func(t adaptiveTicket) bool { return t.scope == s })
		if held && (ticket.a != nil || ticket.fleet != nil) {
			continue // paced: its ticket tells the scope
		}
		key := s.key(c.req)
		e := s.states.Acquire(key, true)
		if c.t.learnStore != nil && s.tellStoreUnpaced(c, key, &e.State, an) {
			s.states.Release(e)
			continue // the fleet's learned pace has it
		}
		a := s.arm(key, &e.State, now)
		if c.told {
			a.SetTold(c.toldRate) // refused under a told limit: learn below it
			e.State.toldGen.Store(c.t.toldGen.Load())
		}
		an.Flight = -1
		if held && ticket.startKey != "" {
			an.Flight = ticket.startOthers // sent in the key's slow start
		}
		a.Untracked(an, c.sent-1, now)
		s.states.Release(e)
	}
}

// quotaSampleEvery is how often, one response in this many, the answer to
// a request paced by nothing is read for a count of the server's quota:
// reading every one would cost a key that is never throttled more than
// the whole transport, and a server that counts does so on every answer.
const quotaSampleEvery = 16

// quotaReadFirst is how many of a transport's first answers are all read
// for a count: a transport is most often made for one API, whose first
// answers then say what its first wave may take.
const quotaReadFirst = 64

// sampleQuota reports whether resp, an answer to a request no adaptive
// scope paced, is read for a count of the server's quota.
func (c *call) sampleQuota(resp *http.Response) bool {
	return len(resp.Header) > 0 && (c.sent <= quotaReadFirst || rand.Uint32()%quotaSampleEvery == 0)
}

// adaptiveTickets are the tickets an attempt holds, one per adaptive
// scope.
type adaptiveTickets = holds[adaptiveTicket]
