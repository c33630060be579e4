package scopes

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/store"
)

// This file is an adaptive scope's side of a learned pace the store keeps
// for the fleet (store.Learned): with such a store, a key's turns are
// taken from the store, whose answer says how long to wait, and what an
// answer teaches is told to it. A refusal any replica sees then teaches
// them all, and they take their turns from one pace. One request of a
// key at a time asks for a turn (the head of the key's line here): turns
// reserved ahead at a pace that then falls would go at the old pace, so
// at most one per transport is.

// sharedKey is this transport's side of one key's learned pace in the
// store: the line its requests wait in for a turn, what the store's last
// answer said, and the blind test's samples of the turns it sent.
type sharedKey struct {
	store    store.Learned
	storeKey string
	head     chan struct{} // holds a token while no request is at the head
	// paced is set while the store's last answer said the key is paced:
	// its requests then line up. overstate is its HintsOverstate, and
	// storeCounts its State.Counted. toldFirst is set once this transport
	// told its first refusal of a request not paced, with what passed
	// before it.
	paced, overstate, storeCounts, toldFirst atomic.Bool
	mu                                       sync.Mutex
	samples                                  learn.Samples // guarded by mu
	// count is the count of the server's quota the last answer carried,
	// read at countAt, told with the next ask (counted set), so that
	// telling it costs no round trip of its own; guarded by mu. A request
	// that waits for the count's reset watches counted (nil while none
	// does): a count that leaves some of the quota may give a turn sooner
	// than the one held said (a bucket refills before its reset), and it
	// is closed when one comes (see watchCount).
	count     store.Outcome
	countAt   time.Time
	counted   chan struct{}
	lastReset time.Duration // the reset of the last count this transport read
	// trial is the trial of a refusal of a request the fleet did not
	// pace, which this transport holds back from the store until the
	// trial says a rate (see trialRefusal); trialPassed is what the
	// refusal tells then. blindHold holds unpaced a key whose trial said
	// a shedder. Guarded by mu.
	trial       learn.Trial
	trialPassed int
	blindHold   learn.Hold
}

// countOf is the outcome that tells the count an answer carried; Counted
// is unset when it carried none.
func countOf(seq uint64, an learn.Answer) store.Outcome {
	if an.Remaining < 0 {
		return store.Outcome{Seq: seq, Kind: store.Answered}
	}
	return store.Outcome{Seq: seq, Kind: store.Answered, Counted: true, Remaining: an.Remaining, Limit: an.Limit,
		Reset: an.Reset, ResetDue: an.ResetDue}
}

// keepCount keeps o's count, read at now, to be told with the next ask;
// a request waiting for the count's reset asks now, if o leaves some of
// the quota.
func (k *sharedKey) keepCount(o store.Outcome, now time.Time) {
	k.mu.Lock()
	k.count, k.countAt = o, now
	if o.Counted && o.Reset > 0 {
		k.lastReset = o.Reset
	}
	if k.counted != nil && o.Counted && o.Remaining > 0 {
		close(k.counted)
		k.counted = nil
	}
	k.mu.Unlock()
}

// watchCount returns a channel closed when a count that leaves some of
// the quota comes, for a request the store holds wait for its count:
// nil unless the wait is the count's reset's (half of it at least). A
// store that has not seen the server refill before the reset holds the
// key to it; a bucket's reset, rounded up to the second, says when it is
// full, and with every request waiting, no answer would show the
// refill. Once the store has seen it, it paces the key at the refill,
// and its waits are far shorter.
func (k *sharedKey) watchCount(wait time.Duration) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lastReset <= 0 || wait < k.lastReset/2 {
		return nil
	}
	if k.counted == nil {
		k.counted = make(chan struct{})
	}
	return k.counted
}

// toldWith appends to outcomes the count kept to be told, once, and what
// passedUnpaced tells.
func (k *sharedKey) toldWith(st *State, outcomes []store.Outcome) []store.Outcome {
	k.mu.Lock()
	if o := k.count; o.Kind != 0 {
		if o.Reset > 0 {
			// The reset it said, from now: it waited to be told.
			if o.Reset -= time.Since(k.countAt); o.Reset <= 0 {
				o.Reset, o.ResetDue = 0, true
			}
		}
		outcomes = append(outcomes, o)
		k.count = store.Outcome{}
	}
	k.mu.Unlock()
	return k.passedUnpaced(st, outcomes)
}

// sharedKey returns st's side of key's learned pace in the store, made on
// first use.
func (s *Scope) sharedKey(key string, st *State, ls store.Learned) *sharedKey {
	if k := st.fleet.Load(); k != nil {
		return k
	}
	k := &sharedKey{store: ls, storeKey: s.StoreKey(key), head: make(chan struct{}, 1)}
	k.head <- struct{}{}
	if !st.fleet.CompareAndSwap(nil, k) {
		return st.fleet.Load()
	}
	return k
}

// fleetTurn is a turn of the fleet's learned pace a request was sent
// under: its key's side in this transport, the request's key, the pace it
// was taken at, and whether the store wants its outcome.
type fleetTurn struct {
	key  *sharedKey
	name string
	rate float64
	tell bool
}

// note keeps what the store's answer says of the key.
func (k *sharedKey) note(a *store.LearnAnswer) {
	k.paced.Store(a.Paced)
	k.overstate.Store(a.HintsOverstate)
	k.storeCounts.Store(a.State.Counted)
}

// sharedAnswer is what admitShared found.
type sharedAnswer uint8

const (
	sharedFailed  sharedAnswer = iota // the store failed: this transport's own learning stands in
	sharedUnpaced                     // the fleet learned nothing yet: the request is not paced
	sharedTurn                        // the request got its turn
)

// admitShared waits for the request's turn of the fleet's learned pace
// for key: it asks the store, and waits as long as its answer says. A
// turn that comes within what the request may wait is reserved, and the
// request goes then; otherwise (a window's hold, say) it waits and asks
// again, or gives up with a *Refusal when the wait is past its
// MaxWait (deadline). A store that fails closed refuses the request.
func (s *Scope) admitShared(r *Request, key string, st *State, deadline time.Time, cfg *Config) (learnedTurn, sharedAnswer, error) {
	k := s.sharedKey(key, st, s.shared.Learned)
	if k.paced.Load() {
		select {
		case <-k.head: // nobody ahead: no timer needed
		default:
			if err := r.waitUntil(s, WaitTurn, k.head, deadline, 0); err != nil {
				return learnedTurn{}, sharedFailed, s.waitError(err, key, deadline, r)
			}
		}
		defer func() { k.head <- struct{}{} }()
	}
	ask := store.LearnAsk{Take: true, Ceiling: sharedCeiling(cfg, &r.Told)}
	var told [2]store.Outcome
	for {
		now := time.Now()
		ask.MaxWait = r.maxWait(now, deadline)
		a, asked := r.Pre.learnAnswer(k.storeKey)
		if asked && !a.Paced && k.paced.Load() {
			// Asked before a refusal paced the fleet: old news, which
			// would let the request, and every one after it, go unpaced.
			asked = false
		}
		var err error
		if !asked {
			ask.Outcomes = k.toldWith(st, told[:0])
			a, err = k.store.Learn(r.Ctx(), k.storeKey, &ask)
		}
		switch {
		case err != nil && r.Ctx().Err() != nil:
			return learnedTurn{}, sharedFailed, r.Ctx().Err()
		case err != nil && store.FailsClosed(err):
			return learnedTurn{}, sharedFailed, &Refusal{Scope: s.name, Key: key, Reason: "store-unavailable", Err: err}
		case err != nil:
			return learnedTurn{}, sharedFailed, nil
		}
		k.note(&a)
		switch {
		case !a.Paced:
			return learnedTurn{}, sharedUnpaced, nil
		case a.Took:
			// The turn is reserved: it fits what the request may wait.
			if err := r.waitFor(s, a.Wait, nil); err != nil {
				return learnedTurn{}, sharedFailed, err
			}
			return learnedTurn{seq: a.Seq, fleet: &fleetTurn{key: k, name: key, rate: a.Rate, tell: a.Tell}}, sharedTurn, nil
		case !deadline.IsZero() && now.Add(a.Wait).After(deadline):
			return learnedTurn{}, sharedFailed, &Refusal{Scope: s.name, Key: key, Reason: "max-wait", RetryIn: a.Wait}
		}
		var sooner <-chan struct{}
		if a.State.Counted {
			sooner = k.watchCount(a.Wait) // a count on its way may give a turn sooner
		}
		if err := r.waitFor(s, a.Wait, sooner); err != nil {
			return learnedTurn{}, sharedFailed, err
		}
	}
}

// passedUnpaced appends to outcomes, once, what this transport let
// through before it found the key paced, when it saw no refusal of it to
// tell that with (see Outcome.Passed).
func (k *sharedKey) passedUnpaced(st *State, outcomes []store.Outcome) []store.Outcome {
	if !k.paced.Load() || k.toldFirst.Load() || k.toldFirst.Swap(true) {
		return outcomes
	}
	st.mu.Lock()
	passed := st.start.Passed()
	st.mu.Unlock()
	return append(outcomes, store.Outcome{Kind: store.Unpaced, Passed: passed})
}

// sharedCeiling is the fastest the fleet's learned pace may go for the
// request, in requests a second: the scope's Rate, and the told limits
// it goes under; 0 for none.
func sharedCeiling(cfg *Config, told *Told) float64 {
	r := cfg.ceiling()
	if told.On {
		r = math.Min(r, told.Rate)
	}
	if math.IsInf(r, 1) {
		return 0
	}
	return r
}

// tellShared tells the store what the answer to a turn of the fleet's
// pace taught: a refusal, an outcome the store asked for, and the blind
// test's verdict. A success with nothing to teach is told nothing. When
// the store fails, the refusal teaches this transport's own pace, which
// stands in while it is away.
func (t Ticket) tellShared(ctx context.Context, answer Answer, now time.Time) {
	f := t.fleet
	k := f.key
	an := readAnswer(answer, now)
	var buf [2]store.Outcome
	outcomes := buf[:0]
	told := countOf(t.seq, an)
	switch {
	case an.Refused:
		told.Kind, told.Hint = store.Refused, an.Hint
		outcomes = append(outcomes, told)
	case an.OK && f.tell:
		told.Kind = store.Passed
		outcomes = append(outcomes, told)
	case told.Counted || an.OK && k.storeCounts.Load():
		// Told with the next ask: a count, or that this success carried
		// none where the store counts.
		k.keepCount(told, now)
	}
	if f.rate > 0 && an.Remaining < 0 && (an.OK || an.Refused) {
		k.mu.Lock()
		k.samples.Note(f.rate, an.OK)
		verdict := learn.NoVerdict
		if an.Refused {
			verdict = k.samples.Verdict(true, nil)
			if verdict == learn.VerdictBlind {
				k.samples.Reset()
			}
		}
		k.mu.Unlock()
		if kind := verdictKind(verdict); kind != 0 {
			outcomes = append(outcomes, store.Outcome{Seq: t.seq, Kind: kind})
		}
	}
	if len(outcomes) == 0 {
		return
	}
	ceiling := sharedCeiling(t.scope.cfg.Load(), &Told{})
	a, serr := k.store.Learn(context.WithoutCancel(ctx), k.storeKey, &store.LearnAsk{Outcomes: outcomes, Ceiling: ceiling})
	if serr == nil {
		k.note(&a)
		return
	}
	if an.Refused {
		t.scope.arm(f.name, &t.entry.State, now).Untracked(an, 0, now)
	}
}

// tellWithdrawn tells the store that the turn, which was to tell its
// answer, was never sent. A store that fails is left to its own timeout.
func (t Ticket) tellWithdrawn() {
	withdrawn := store.Outcome{Seq: t.seq, Kind: store.Withdrawn}
	t.scope.tellOutcome(context.Background(), t.fleet.key, withdrawn, sharedCeiling(t.scope.cfg.Load(), &Told{}))
}

// verdictKind is the outcome that tells the store a blind test's verdict;
// 0 for none.
func verdictKind(v learn.Verdict) store.OutcomeKind {
	switch v {
	case learn.VerdictBlind:
		return store.Blind
	case learn.VerdictRated:
		return store.Rated
	case learn.VerdictUndecided:
		return store.Undecided
	}
	return 0
}

// tellStoreUnpaced tells the store of a rate-limit signal in the answer
// to a request of key no learned pace let go: a refusal, which teaches the
// fleet's pace, at once; a count of the server's quota, with the next ask.
// It reports whether the store took it; when the store failed, this
// transport's own pace learns it instead.
func (s *Scope) tellStoreUnpaced(r *Request, key string, st *State, an learn.Answer) bool {
	k := s.sharedKey(key, st, s.shared.Learned)
	if !an.Refused {
		if told := countOf(0, an); told.Counted {
			k.keepCount(told, time.Now()) // told with the next ask
		}
		return true
	}
	st.mu.Lock()
	// What this transport's slow start let through before: the fleet's
	// sum is the quota of a window that ran out.
	passed := st.start.Passed()
	st.mu.Unlock()
	if !r.Told.On && an.Remaining < 0 && s.trialRefusal(key, k, an.Hint, passed) {
		return true // held back: tried first
	}
	return s.tellOutcome(r.Ctx(), k, k.unpacedRefusal(an, passed), sharedCeiling(s.cfg.Load(), &r.Told))
}

// unpacedRefusal is the outcome that tells the store the refusal an of
// a request the fleet did not pace; the transport's first tells what
// its slow start let through before, passed.
func (k *sharedKey) unpacedRefusal(an learn.Answer, passed int) store.Outcome {
	refused := countOf(0, an)
	refused.Kind, refused.Hint = store.Refused, an.Hint
	if !k.toldFirst.Swap(true) {
		refused.Passed = passed
	}
	return refused
}

// tellOutcome tells the store one outcome outside a turn's ask (the
// refusal of a request no pace let go, a turn withdrawn), and reports
// whether it took it.
func (s *Scope) tellOutcome(ctx context.Context, k *sharedKey, o store.Outcome, ceiling float64) bool {
	ask := store.LearnAsk{Outcomes: []store.Outcome{o}, Ceiling: ceiling}
	a, err := k.store.Learn(context.WithoutCancel(ctx), k.storeKey, &ask)
	if err != nil {
		return false
	}
	k.note(&a)
	return true
}

// trialRefusal takes in the refusal, with hint and no count, of a request
// of key the fleet did not pace, and reports whether it is held back from
// the store. As a Pacer does (see internal/learn/shed.go), this
// transport tells a shedder from a rate before the fleet slows down: a
// refusal before passed reached two, or once a trial said a shedder,
// starts a trial, the key unpaced meanwhile (its slow start over); the
// refusals of a key whose trial said a shedder teach nothing while its
// hold lasts. Told the store, the refusal would pace every replica, and
// only the blind test, after many slow turns, would give the pace back.
// The store keeps no trial: the verdict is this transport's, from what
// it sees, as the blind test's are.
func (s *Scope) trialRefusal(key string, k *sharedKey, hint time.Duration, passed int) bool {
	if k.paced.Load() {
		return false // the fleet paces the key: its turns teach it
	}
	now := time.Now()
	k.mu.Lock()
	switch {
	case k.trial.On():
		end := k.trial.Answer(false, now)
		k.mu.Unlock()
		s.trialEnded(key, k, end, now)
		// A rate's: this refusal is told, the one the trial held back
		// its sibling.
		return end != learn.TrialRate
	case k.blindHold.Holds(now):
		k.mu.Unlock()
		return true
	case !learn.TrialStarts(hint, passed, k.blindHold.Held()):
		k.mu.Unlock()
		return false
	}
	k.trial.Start(now)
	k.trialPassed = passed
	k.mu.Unlock()
	// Its answers are those of the requests that follow at once: the
	// key's slow start, one request at a time after a refusal, would
	// send too few within the trial's span.
	s.markAnswered(key)
	s.shared.trialUntil(now.Add(learn.TrialSpan))
	return true
}

// trialEnded ends k's trial as end says: a shedder's refusals leave the
// key unpaced and hold their successors back from the store.
func (s *Scope) trialEnded(key string, k *sharedKey, end learn.TrialEnd, now time.Time) {
	if end != learn.TrialShed {
		return
	}
	k.mu.Lock()
	hold := k.blindHold.Start(now)
	k.mu.Unlock()
	if s.Trace != nil {
		s.Trace("%s: trial: let through after the refusal: shedding; unpaced for %v", key, hold)
	}
}

// tellTrialRefusal tells the store the refusal a trial held back, which
// the trial found a rate's, and reports whether the store took it.
func (s *Scope) tellTrialRefusal(ctx context.Context, k *sharedKey, ceiling float64) bool {
	refused := store.Outcome{Kind: store.Refused}
	if !k.toldFirst.Swap(true) {
		k.mu.Lock()
		refused.Passed = k.trialPassed
		k.mu.Unlock()
	}
	return s.tellOutcome(ctx, k, refused, ceiling)
}

// Trials reports whether a trial of a refusal held back from the store
// may be running: then the successes of requests no pace let go are read
// for it (TrialRuns, TrialAnswered). It reads one word.
func (t *Shared) Trials() bool { return t.trialsUntil.Load() != 0 }

// TrialAnswered gives the answer to a request of key the scope did not
// pace, neither refused nor an error, to the key's trial, if one runs.
func (s *Scope) TrialAnswered(r *Request, key string, resp *http.Response, now time.Time) {
	an := learn.ReadAnswer(resp, false, now)
	if !an.OK || an.Remaining >= 0 {
		return // a count, which the store takes with the next ask
	}
	e := s.states.Acquire(key, false)
	if e == nil {
		return
	}
	defer s.states.Release(e)
	k := e.State.fleet.Load()
	if k == nil {
		return
	}
	k.mu.Lock()
	end := k.trial.Answer(true, now)
	k.mu.Unlock()
	s.trialEnded(key, k, end, now)
	if end == learn.TrialRate && !s.tellTrialRefusal(r.Ctx(), k, sharedCeiling(s.cfg.Load(), &r.Told)) {
		// The store is away: this transport's own pace learns it.
		s.arm(key, &e.State, now).Untracked(learn.Answer{Refused: true, Remaining: -1, Flight: -1}, 0, now)
	}
}

// pacedInStore reports whether the store's last answer for the key whose
// state st is said the fleet paces it.
func (s *Scope) pacedInStore(st *State) bool {
	k := st.fleet.Load()
	return k != nil && k.paced.Load()
}

// trialUntil makes the transport read its successes for trials until at
// least until.
func (t *Shared) trialUntil(until time.Time) {
	n := until.UnixNano()
	for {
		was := t.trialsUntil.Load()
		if was >= n || t.trialsUntil.CompareAndSwap(was, n) {
			return
		}
	}
}

// TrialRuns reports whether a trial may take the answer to a request
// answered at now. A span that has passed is cleared, so that a success
// after it reads no clock for trials (the check before the call is of
// trialsUntil alone).
func (t *Shared) TrialRuns(now time.Time) bool {
	until := t.trialsUntil.Load()
	if until != 0 && now.UnixNano() > until {
		t.trialsUntil.CompareAndSwap(until, 0) // a trial since moved it on: keep that
		return false
	}
	return until != 0
}

// TrialBlind reports whether key holds blind at now, its trial in this
// transport having said a shedder.
func (s *Scope) TrialBlind(key string, now time.Time) bool {
	e := s.states.Acquire(key, false)
	if e == nil {
		return false
	}
	defer s.states.Release(e)
	k := e.State.fleet.Load()
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.blindHold.Holds(now)
}

// A cap on the key's requests in flight (a concurrency limit, nginx's
// limit_conn) is one this transport holds to with what it has in flight
// itself, which no pace of the fleet's can stand for: paced at the rate
// the cap serves, requests in flight jitter past it and are refused, and
// a pace low enough that they do not leaves a third of the cap unused.
// So a key whose refusals this transport's own requests in flight
// explain is learned here, by its own Pacer, as without a store, and
// the store is told none of them. Should the Pacer find no cap after all
// (a bucket's burst run out refuses a first wave alike, and a refusal
// with nothing else in flight proves no cap), the key goes back to the
// store's pace with that refusal. A cap every replica shares shows no
// cap on any one's requests alone: the fleet's pace answers it.

// capHere reports whether a refusal of a request the key's slow start
// let go, with an.Flight others of this transport's in flight, is one
// this transport's own requests in flight explain: its slow start shows
// a cap (Start.ShowsCap), or its own Pacer holds one. A long hint is a
// window's or a rate's, not a cap's, whose place frees as soon as a
// request ends.
func (s *Scope) capHere(st *State, an learn.Answer) bool {
	if !an.Refused || an.Remaining >= 0 || an.Hint > time.Second {
		return false
	}
	if a := st.adapt.Load(); a != nil {
		return a.CapHeld()
	}
	if an.Flight < 0 {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.start.ShowsCap(an.Flight)
}

// heldHere reports whether this transport's own Pacer holds the key whose
// state st is to a cap on its requests in flight: its requests take no
// turn of the fleet's pace.
func heldHere(st *State) bool {
	a := st.adapt.Load()
	return a != nil && a.CapHeld()
}

// handBack gives the key back to the store's pace when the refusal of
// one of its requests ended the cap its own Pacer a held it to: the
// refusal is told to the store, as the key's first, and the Pacer goes.
// It reports whether the store took it; when it did not, the Pacer
// stays, and stands in while the store is away.
func (s *Scope) handBack(ctx context.Context, st *State, a *learn.Pacer, an learn.Answer) bool {
	k := st.fleet.Load() // made when the key's first request asked the store
	if k == nil {
		return false
	}
	st.mu.Lock()
	passed := st.start.Passed()
	st.mu.Unlock()
	if !s.tellOutcome(ctx, k, k.unpacedRefusal(an, passed), sharedCeiling(s.cfg.Load(), &Told{})) {
		return false
	}
	if s.Trace != nil {
		s.Trace("%s: no cap on this transport's requests in flight: back to the fleet's pace", k.storeKey)
	}
	st.adapt.CompareAndSwap(a, nil)
	a.Retire() // the requests in its line ask the store for their turns
	return true
}
