package scopes

import (
	"context"
	"net/http"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/internal/learn"
)

// This file is an adaptive scope's admission by the learned pace
// (internal/learn), and the tickets that carry each answer back.

// learnedTurn is how an adaptive scope let a request go: the number it
// is sent under when paced, by the scope's own pace or by the store's
// (fleet); or in its key's slow start, with others of the key in flight.
type learnedTurn struct {
	seq      uint64
	starting bool
	others   int
	fleet    *fleetTurn
}

// admitLearned waits for the request's turn in an adaptive scope. A key
// that has learned something is paced by it: by what the fleet learned,
// when the transport's store keeps it (admitShared), else by what this
// transport learned (admitAdaptive). One that has not opens up by slow
// start (see admitStarting), then, its slow start done with no rate-limit
// signal, goes unpaced. A request paced by a told limit needs no slow
// start: the limit says what the first requests may take.
func (s *Scope) admitLearned(r *Request, key string, st *State, deadline time.Time, cfg *Config) (learnedTurn, error) {
	for {
		inStore := false
		switch {
		case s.shared.Learned != nil && heldHere(st):
			// A cap on this transport's requests in flight holds the
			// key: its own Pacer paces it (see capHere).
			inStore = true
		case s.shared.Learned != nil:
			turn, got, err := s.admitShared(r, key, st, deadline, cfg)
			switch {
			case err != nil || got == sharedTurn:
				return turn, err
			case got == sharedUnpaced && !cfg.pacedFromStart():
				// The store answers for the fleet, which learned nothing:
				// what this transport learned while the store was away is
				// gone.
				// A cap this transport learned on its requests in flight
				// (armed since heldHere looked) stays: the store knows
				// none.
				inStore = true
				if a := st.adapt.Load(); a != nil && !a.Busy() && !a.CapHeld() && st.adapt.CompareAndSwap(a, nil) {
					a.Retire() // a request in its line asks the store
				}
			}
		}
		turn, askStore, err := s.admitOwn(r, key, st, deadline, cfg, inStore)
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
func (s *Scope) admitOwn(r *Request, key string, st *State, deadline time.Time, cfg *Config, inStore bool) (turn learnedTurn, askStore bool, err error) {
	told := &r.Told
	for {
		// fleet says the store's pace is the key's, what this transport
		// learned nothing: unless a cap on this transport's requests in
		// flight holds the key here (see capHere).
		fleet := inStore && !heldHere(st)
		a := st.adapt.Load()
		if fleet {
			a = nil
		}
		if a != nil && told.On && st.toldGen.Load() != s.shared.ToldGen.Load() && st.adapt.CompareAndSwap(a, nil) {
			// Learned under told limits that were told anew since: they
			// are trusted again, until the server refuses under them.
			a = nil
		}
		if a == nil && cfg.pacedFromStart() {
			a = s.arm(key, st, time.Now())
		}
		switch {
		case a != nil && told.On:
			// Paced below told limits: their FailFast and MaxWait bound
			// the wait as much as their own turns.
			under := *cfg
			under.FailFast = cfg.FailFast || told.FailFast
			if w := told.MaxWait; w > 0 && (under.MaxWait == 0 || w < under.MaxWait) {
				under.MaxWait = w
				if d := time.Now().Add(w); deadline.IsZero() || d.Before(deadline) {
					deadline = d
				}
			}
			seq, err := s.admitAdaptive(r, key, a, st, deadline, &under)
			return learnedTurn{seq: seq}, false, err
		case a != nil:
			seq, err := s.admitAdaptive(r, key, a, st, deadline, cfg)
			if err == nil && inStore && a.Retired() {
				// The key went back to the store's pace while the request
				// waited (handBack): it asks the store for its turn.
				a.Cancel()
				return learnedTurn{}, true, nil
			}
			return learnedTurn{seq: seq}, false, err
		case told.On:
			// Paced by a told limit, which says what the first wave may
			// take: unpaced until a refusal, and no state looked up meanwhile.
			s.markAnswered(key)
			return learnedTurn{}, false, nil
		case s.answered.Has(s.keyHash(key)) || !s.lazy.Load():
			return learnedTurn{}, false, nil
		}
		others, wake := s.admitStarting(st, fleet)
		if wake == nil {
			return learnedTurn{starting: true, others: others}, false, nil
		}
		if err := r.waitUntil(s, WaitTurn, wake, deadline, 0); err != nil {
			return learnedTurn{}, false, s.waitError(err, key, deadline, r)
		}
		if inStore && s.pacedInStore(st) {
			return learnedTurn{}, true, nil
		}
	}
}

// admitStarting lets a request of a key in slow start (learn.Start) go,
// when the key has room in flight for one more, and returns how many of
// the key's are in flight beside it, and nil.
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
func (s *Scope) admitStarting(st *State, inStore bool) (others int, wake <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if inStore && (s.pacedInStore(st) || heldHere(st)) || !inStore && st.adapt.Load() != nil {
		return 0, closedChan
	}
	return st.start.Enter()
}

// keyHash is key's hash in the answered slots (learn.Answered): odd, so
// never 0 (an empty slot) nor what a learning key leaves there.
func (s *Scope) keyHash(key string) uint64 {
	return s.states.Hash(key) | 1
}

// Unpaced reports whether a request under key goes unpaced in the scope
// without a look at its state: an adaptive key whose slow start ended
// with nothing learned, as far as the answered slots remember.
func (s *Scope) Unpaced(key string) bool {
	return s.lazy.Load() && s.shared.Learned == nil && s.answered.Has(s.keyHash(key))
}

// learning marks key's answered slot: the key has learned something, and
// its requests look up what.
func (s *Scope) learning(key string) { s.answered.Learning(s.keyHash(key)) }

// endStarting ends a request of the slow start of the key whose state st
// is, sent with others of the key in flight (-1 for one not sent). A slow
// start that reaches learn.StartDone with nothing learned marks the key
// answered.
func (s *Scope) endStarting(st *State, key string, succeeded bool, others int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	done := st.start.End(succeeded, others)
	if a := st.adapt.Load(); a != nil {
		a.Unpaced(succeeded, others) // the pace was armed while it was on its way
	} else if done {
		// Under st.mu, as armWith's learning: marked after the key
		// armed, it would go unpaced with its pace unread.
		s.markAnswered(key)
	}
}

// markAnswered marks key's answered slot: the key has learned nothing and
// needs no slow start, and its requests go unpaced without a look at its
// state.
func (s *Scope) markAnswered(key string) { s.answered.Mark(s.keyHash(key)) }

// admitAdaptive waits for the request's turn in an adaptive scope: its
// place in the key's line, then, at the head, its place in the pace, or
// room in the count or the window the key learned. It returns the number
// the request is sent under.
func (s *Scope) admitAdaptive(r *Request, key string, a *learn.Pacer, st *State, deadline time.Time, cfg *Config) (uint64, error) {
	now := time.Now()
	if seq, sent := a.TakeAlone(now); sent {
		return seq, nil
	}
	expected, known := a.Join(now)
	defer a.Leave()
	if expected > 0 || !known {
		// The told limits' FailFast and MaxWait, when under them.
		if err := st.told.Enqueue(expected, now, deadline, &cfg.Config); err != nil {
			return 0, s.refusal(key, err)
		}
		defer st.told.Dequeue()
	}
	head := a.Head()
	select {
	case <-head: // nobody ahead: no timer needed
	default:
		if err := r.waitUntil(s, WaitTurn, head, deadline, expected); err != nil {
			return 0, s.waitError(err, key, deadline, r)
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
			if err := r.waitUntil(s, WaitTurn, ready, deadline, 0); err != nil {
				return 0, s.waitError(err, key, deadline, r)
			}
		default:
			if !deadline.IsZero() && now.Add(delay).After(deadline) {
				return 0, &Refusal{Scope: s.name, Key: key, Reason: "max-wait", RetryIn: delay}
			}
			// An answer may come first and say the request may go sooner.
			if err := r.waitFor(s, delay, ready); err != nil {
				return 0, err
			}
		}
	}
}

// Ticket is a request an adaptive scope let go, whose answer the scope
// awaits; the zero Ticket is none.
type Ticket struct {
	scope *Scope
	entry *keyed.Entry[State]
	a     *learn.Pacer // what the scope learned of the request's key; nil in slow start
	seq   uint64       // the request's number in its key
	// fleet is set for a turn of the fleet's pace a store keeps (see
	// shared.go); out of the ticket, which every call holds inline,
	// since only a call through a store needs it.
	fleet *fleetTurn
	// startKey is the key of a request sent in its key's slow start, and
	// startOthers how many of the key's were in flight when it was.
	startKey    string
	startOthers int
}

// Held reports whether t is a ticket.
func (t Ticket) Held() bool { return t.entry != nil }

// Paced reports whether a pace let the request go, the scope's own or
// the fleet's, rather than the key's slow start: its answer then
// teaches that pace.
func (t Ticket) Paced() bool { return t.a != nil || t.fleet != nil }

// Of reports whether t is a ticket of s.
func (t Ticket) Of(s *Scope) bool { return t.scope == s }

// Answer is what a request's answer says, for a learned pace: the
// response or the error, whether it was a refusal, and the refusal's
// wait hint as the call honours it.
type Answer struct {
	Resp    *http.Response
	Err     error
	Refused bool
	Hint    time.Duration
}

// Effect is what an answer, told the scope, says of the key's pause and
// of the request's retry: the refusal's hint should not pause the key
// when HintPauses is false (the learned pace has seen its server's hints
// overstate, or the fleet's holds a window itself); HeldUntil is when a
// window the key learned comes back, to be held for every transport
// sharing the pause gate's store; Capped says a cap the key learned on
// its requests in flight explains the refusal, so that the retry may go
// at once: the key's line holds it until there is room.
type Effect struct {
	HintPauses bool
	HeldUntil  time.Time
	Capped     bool
}

// Finish tells the scope how the request went at now, and releases its
// entry. The answer to a request of a slow start makes room for the
// key's next ones. closed says the key's breaker closed with it: the
// pace then resumes gently.
func (t Ticket) Finish(ctx context.Context, an Answer, closed bool, now time.Time) Effect {
	fx := Effect{HintPauses: true}
	switch {
	case t.fleet != nil:
		t.tellShared(ctx, an, now)
		// The store holds a learned window for the fleet itself.
		fx.HintPauses = !t.fleet.key.overstate.Load()
	case t.a == nil:
		ok := an.Err == nil && !an.Refused && an.Resp.StatusCode >= 200 && an.Resp.StatusCode <= 299
		t.scope.endStarting(&t.entry.State, t.startKey, ok, t.startOthers)
	default:
		read := readAnswer(an, now)
		capHeld := t.scope.shared.Learned != nil && read.Refused && t.a.CapHeld()
		fx.Capped = t.a.Outcome(t.seq, read, now)
		if capHeld && !t.a.CapHeld() && t.scope.handBack(ctx, &t.entry.State, t.a, read) {
			break // the fleet's pace has the key again
		}
		fx.HintPauses = t.a.HintPausesKey()
		if closed {
			t.a.Pause(now) // the breaker closes: resume gently
		}
		fx.HeldUntil = t.a.WindowHeldUntil()
	}
	t.scope.states.Release(t.entry)
	return fx
}

// Cancel withdraws a request that will not be sent.
func (t Ticket) Cancel() {
	switch {
	case t.fleet != nil:
		// A turn of the fleet's pace not used is spent, as a bucket's;
		// one whose answer the store waits for is told, or the turns it
		// holds back wait until the store gives up on it. Told aside: a
		// request cancelled does not wait on the store.
		if t.fleet.tell {
			go t.tellWithdrawn()
		}
	case t.a == nil:
		t.scope.endStarting(&t.entry.State, t.startKey, false, -1)
	default:
		t.a.Cancel()
	}
	t.scope.states.Release(t.entry)
}

// arm returns what the scope learned of key, whose state st is, making
// it on the key's first rate-limit signal.
func (s *Scope) arm(key string, st *State, now time.Time) *learn.Pacer {
	var armed *learn.Pacer
	s.armWith(key, st, now, func(a *learn.Pacer) bool { armed = a; return false })
	return armed
}

// armWith is arm that hands what the scope learned of key to signal,
// which teaches it the rate-limit signal at hand, and returns what
// signal returns. The signal that makes the key's pace is taught before
// the pace is published: a request admitted by the pace, answered in
// the same instant, would otherwise be learned first, and a shedder's
// first refusal, with nothing let through before it, taken for a rate's
// (learn.Trial).
func (s *Scope) armWith(key string, st *State, now time.Time, signal func(*learn.Pacer) bool) bool {
	if a := st.adapt.Load(); a != nil {
		return signal(a)
	}
	cfg := s.cfg.Load()
	a := learn.New(cfg.StartRate, cfg.ceiling(), now)
	if s.Trace != nil {
		a.SetTrace(s.Trace)
	}
	// Under st.mu, as every arming: the slow start's successes so far,
	// none missed nor counted twice, and one pace made.
	st.mu.Lock()
	if was := st.adapt.Load(); was != nil {
		st.mu.Unlock()
		return signal(was)
	}
	a.Adopt(&st.start)
	got := signal(a)
	st.adapt.Store(a)
	s.learning(key) // under st.mu, as endStarting's mark
	st.mu.Unlock()
	return got
}

// readAnswer reads an answer for the learned pace: its outcome, the
// count of the server's quota its headers carry (see [learn.ReadAnswer])
// and the refusal's hint as the call honours it. A request that got no
// response tells neither.
func readAnswer(an Answer, now time.Time) learn.Answer {
	if an.Err != nil {
		return learn.Answer{Remaining: -1, Flight: -1}
	}
	read := learn.ReadAnswer(an.Resp, an.Refused, now)
	read.Hint = an.Hint
	return read
}

// Untracked tells the scope of a rate-limit signal in the answer to a
// request of key it did not pace (its key had learned nothing when it
// was admitted, or a told limit paced it): a refusal, or a count of the
// server's quota. The key's learning starts with it. held is the
// request's ticket of the scope, if any (one of its slow start). It
// reports whether a cap the key learned on its requests in flight
// explains the refusal (see Effect.Capped).
func (s *Scope) Untracked(r *Request, key string, an Answer, held Ticket, now time.Time) (capped bool) {
	read := readAnswer(an, now)
	if !read.Refused && read.Remaining < 0 {
		return false // no signal after all
	}
	e := s.states.Acquire(key, true)
	defer s.states.Release(e)
	read.Flight = -1
	if held.startKey != "" {
		read.Flight = held.startOthers // sent in the key's slow start
	}
	if s.shared.Learned != nil && !s.capHere(&e.State, read) && s.tellStoreUnpaced(r, key, &e.State, read) {
		return false // the fleet's learned pace has it
	}
	return s.armWith(key, &e.State, now, func(a *learn.Pacer) bool {
		if r.Told.On {
			a.SetTold(r.Told.Rate) // refused under a told limit: learn below it
			e.State.toldGen.Store(s.shared.ToldGen.Load())
		}
		if s.shared.Learned != nil {
			a.Retirable() // held here for a cap, it may go back to the store's pace
		}
		return a.Untracked(read, r.Sent-1, now)
	})
}
