package learn

import (
	"math"
	"testing"
	"time"

	"github.com/ratewise/ratewise/internal/learn/learntest"
	"github.com/ratewise/ratewise/store"
)

var sharedT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// takeAt takes a turn of s at now for a request that may wait maxWait.
func takeAt(s *Shared, now time.Time, maxWait time.Duration) store.LearnAnswer {
	return s.Learn(now, &store.LearnAsk{Take: true, MaxWait: maxWait})
}

// tell tells s the outcomes at now, taking no turn.
func tell(s *Shared, now time.Time, outcomes ...store.Outcome) store.LearnAnswer {
	return s.Learn(now, &store.LearnAsk{Outcomes: outcomes})
}

// askingTurn takes s's next turn at now, named what in a failure, and
// checks that it asks for its outcome and that a turn taken meanwhile
// waits for it.
func askingTurn(t *testing.T, s *Shared, now time.Time, what string) store.LearnAnswer {
	t.Helper()
	asker := takeAt(s, now, time.Minute)
	if !asker.Took || !asker.Tell {
		t.Fatalf("%s: %+v, want it taken, its outcome asked for", what, asker)
	}
	if a := takeAt(s, now, time.Minute); a.Took || a.Wait != sharedAskPoll {
		t.Fatalf("a turn while %s asks: %+v, want none, asked again in %v", what, a, sharedAskPoll)
	}
	return asker
}

// reopenedTurns takes the first turn of s's window reopened at opens,
// which asks, tells it passed, and takes n turns more at once, returning
// theirs.
func reopenedTurns(t *testing.T, s *Shared, opens time.Time, n int) []uint64 {
	t.Helper()
	asker := takeAt(s, opens, time.Minute)
	tell(s, opens, store.Outcome{Seq: asker.Seq, Kind: store.Passed})
	var seqs []uint64
	for range n {
		a := takeAt(s, opens, time.Minute)
		if !a.Took {
			t.Fatalf("a turn of the open window: %+v, want it taken", a)
		}
		seqs = append(seqs, a.Seq)
	}
	return seqs
}

func refusal(seq uint64, hint time.Duration) store.Outcome {
	return store.Outcome{Seq: seq, Kind: store.Refused, Hint: hint}
}

// A key nobody was refused for is not paced and keeps no turn.
func TestSharedNothingLearnedIsUnpaced(t *testing.T) {
	var s Shared
	if a := takeAt(&s, sharedT0, time.Second); a.Paced || a.Took || a.Seq != 0 || a.Wait != 0 {
		t.Errorf("a key that learned nothing: %+v, want unpaced, no turn", a)
	}
}

// The first refusal any replica sees paces the key for all: a search
// from adaptiveProbeStart, its first turn an interval after the refusal.
func TestSharedFirstRefusalPacesTheKey(t *testing.T) {
	var s Shared
	a := tell(&s, sharedT0, refusal(0, 0))
	if !a.Paced || a.State.Rate != adaptiveProbeStart {
		t.Fatalf("after the first refusal: %+v, want paced at %v", a, adaptiveProbeStart)
	}
	iv := interval(adaptiveProbeStart)
	a = takeAt(&s, sharedT0, time.Second)
	if !a.Took || a.Seq != 1 || a.Wait != iv {
		t.Errorf("the first turn: %+v, want turn 1 reserved an interval (%v) on", a, iv)
	}
}

// A refusal of a turn taken before the last decrease is a sibling of its
// event: the pace falls once per event, not once per refusal.
func TestSharedSiblingsDecreaseOnce(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	now := sharedT0
	var seqs []uint64
	for range 4 {
		a := takeAt(&s, now, time.Second)
		now = now.Add(a.Wait)
		seqs = append(seqs, a.Seq)
	}
	before := tell(&s, now).State.Rate
	after := tell(&s, now, refusal(seqs[0], 0)).State.Rate
	if after >= before {
		t.Fatalf("rate after a refusal %.2f, want below %.2f", after, before)
	}
	for _, seq := range seqs[1:] {
		if got := tell(&s, now, refusal(seq, 0)).State.Rate; got != after {
			t.Fatalf("refusal of turn %d, taken before the decrease: rate %.2f, want it left at %.2f", seq, got, after)
		}
	}
	a := takeAt(&s, now, time.Second)
	if got := tell(&s, now.Add(a.Wait), refusal(a.Seq, 0)).State.Rate; got >= after {
		t.Errorf("refusal of a turn taken after the decrease: rate %.2f, want below %.2f", got, after)
	}
}

// Turns are reserved at most an interval ahead: one further away would
// go at the pace of now should the pace fall meanwhile; the request asks
// again an interval before it.
func TestSharedReservesOneIntervalAhead(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	iv := interval(adaptiveProbeStart)
	first := takeAt(&s, sharedT0, time.Second) // reserved an interval on
	second := takeAt(&s, sharedT0, time.Second)
	if !first.Took || second.Took || second.Wait != iv {
		t.Errorf("two turns asked at once: %+v then %+v; want the first reserved, the second told to ask again in %v", first, second, iv)
	}
	if a := takeAt(&s, sharedT0.Add(second.Wait), time.Second); !a.Took || a.Seq != 2 {
		t.Errorf("asked again then: %+v, want turn 2", a)
	}
	if a := takeAt(&s, sharedT0, 0); a.Took || a.Wait <= 0 {
		t.Errorf("a request that may not wait, turns reserved ahead: %+v, want no turn and the wait", a)
	}
}

// A decrease spaces the next turn an interval of the new pace after the
// last turn taken, which may be reserved ahead: it never gives a turn
// that goes before the reserved one's interval.
func TestSharedDecreaseKeepsReservedTurns(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	reserved := takeAt(&s, sharedT0, time.Second)
	last := sharedT0.Add(reserved.Wait)
	cut := tell(&s, sharedT0.Add(time.Millisecond), refusal(reserved.Seq, 0))
	next := takeAt(&s, sharedT0.Add(time.Millisecond), time.Minute)
	goes := sharedT0.Add(time.Millisecond).Add(next.Wait)
	if want := last.Add(interval(cut.State.Rate)); next.Took && goes.Before(want) || !next.Took && next.Wait <= 0 {
		t.Errorf("the turn after a decrease goes at %v, want no sooner than %v: an interval of the new pace after the reserved turn at %v",
			goes.Sub(sharedT0), want.Sub(sharedT0), last.Sub(sharedT0))
	}
}

// Between two refusals the fleet measures its server by the turns that
// passed, which every replica took: S turns over a span paces at the
// measure's low end, (S-1)/span, or a cut of the pace that ran the server
// dry when that is higher, and the search ends.
func TestSharedMeasuresByTheTurnsBetweenRefusals(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	now := sharedT0
	var seq uint64
	for now.Before(sharedT0.Add(300 * time.Millisecond)) {
		a := takeAt(&s, now, time.Second)
		if a.Took {
			seq = a.Seq
		}
		now = now.Add(a.Wait)
	}
	before := tell(&s, now).State.Rate
	got := tell(&s, now, refusal(seq, 0)).State.Rate
	span := now.Sub(sharedT0).Seconds()
	want := math.Max(float64(seq-2)/span, before*adaptiveCut)
	if math.Abs(got-want) > want*0.01 || s.probing {
		t.Errorf("%d turns passed in %.3fs at up to %.1f/s, then refused: rate %.2f (probing %v), want the measure, %.2f",
			seq-1, span, before, got, s.probing, want)
	}
}

// A refusal asking for more than a second takes the key for a window's:
// held until the window reopens; then its first turn asks alone whether
// it did, the others waiting for its outcome; a refusal once the window
// let through what it had confirms its quota, and the next window holds
// at it.
func TestSharedWindowHeldAndCounted(t *testing.T) {
	var s Shared
	a := tell(&s, sharedT0, refusal(0, 2*time.Second))
	if !a.State.Windowed || a.State.HeldUntil != sharedT0.Add(2*time.Second) {
		t.Fatalf("after a refusal asking 2s: %+v, want windowed, held 2s", a.State)
	}
	if a := takeAt(&s, sharedT0.Add(time.Second), time.Minute); a.Took || a.Wait != time.Second {
		t.Fatalf("a turn while held: %+v, want none, and the hold's second left", a)
	}
	opens := sharedT0.Add(2 * time.Second)
	asker := askingTurn(t, &s, opens, "the first turn after the window reopens")
	tell(&s, opens, store.Outcome{Seq: asker.Seq, Kind: store.Passed})
	var last uint64
	for range 9 {
		a := takeAt(&s, opens, time.Minute)
		if !a.Took {
			t.Fatalf("a turn once the window answered: %+v, want it taken", a)
		}
		last = a.Seq
	}
	// The tenth of the window is refused: nine went through.
	a = tell(&s, opens.Add(time.Millisecond), refusal(last, 2*time.Second))
	if a.State.Quota != 9 {
		t.Fatalf("the window's refusal: quota %d, want the 9 turns before it", a.State.Quota)
	}
	next := a.State.HeldUntil
	for i := range 9 {
		if a := takeAt(&s, next.Add(time.Duration(i)*time.Millisecond), time.Minute); !a.Took {
			t.Fatalf("turn %d of the next window: %+v, want it taken", i+1, a)
		}
	}
	if a := takeAt(&s, next.Add(10*time.Millisecond), time.Minute); a.Took || a.Wait <= 0 {
		t.Errorf("a tenth turn of a window of 9: %+v, want none until the next turn", a)
	}
}

// Turns taken in one instant reach the server in any order: the refusal
// that closes a window may be of a turn taken before others that passed.
// The quota is every turn the window gave but the refused ones, those
// refused after it too; counted as the turns before the first refused, a
// window of 10 would be kept to 7 for good.
func TestSharedWindowQuotaCountsTheTurnsThatPassedAfterTheRefusedOne(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 2*time.Second))
	opens := sharedT0.Add(2 * time.Second)
	seqs := reopenedTurns(t, &s, opens, 10)
	// Of the 11 turns, the 9th, 10th and 11th were refused, the 10th's
	// refusal told first: 8 went through.
	now := opens.Add(time.Millisecond)
	if a := tell(&s, now, refusal(seqs[8], 2*time.Second)); a.State.Quota != 10 {
		t.Fatalf("the first refusal, of the 10th turn of 11: quota %d, want the 10 others", a.State.Quota)
	}
	tell(&s, now, refusal(seqs[9], 2*time.Second))
	if a := tell(&s, now, refusal(seqs[7], 2*time.Second)); a.State.Quota != 8 {
		t.Errorf("the 11th and the 9th refused after it: quota %d, want 8", a.State.Quota)
	}
}

// A window's turn that asks, withdrawn before it was sent (its request
// waited out a pause instead), frees the turns it held back at once, and
// the next turn asks in its place; untold, they waited out
// sharedAskTimeout, a second of a fixed window of 30 per 10 s lost.
func TestSharedWindowAskWithdrawnAsksAgain(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 2*time.Second))
	opens := sharedT0.Add(2 * time.Second)
	asker := takeAt(&s, opens, time.Minute)
	if !asker.Took || !asker.Tell {
		t.Fatalf("the first turn after the window reopens: %+v, want it asking", asker)
	}
	if a := takeAt(&s, opens, time.Minute); a.Took {
		t.Fatalf("a turn while the first asks: %+v, want none", a)
	}
	tell(&s, opens, store.Outcome{Seq: asker.Seq, Kind: store.Withdrawn})
	again := takeAt(&s, opens.Add(time.Millisecond), time.Minute)
	if !again.Took || !again.Tell {
		t.Fatalf("the turn after the asking one was withdrawn: %+v, want it taken and asking in its place", again)
	}
	tell(&s, opens, store.Outcome{Seq: again.Seq, Kind: store.Passed})
	for i := range 3 {
		if a := takeAt(&s, opens.Add(time.Millisecond), time.Minute); !a.Took || a.Tell {
			t.Fatalf("turn %d once the window answered: %+v, want it taken, asking nothing", i+2, a)
		}
	}
	// A withdrawn turn that asked nothing changes nothing.
	before := s
	tell(&s, opens.Add(time.Millisecond), store.Outcome{Seq: again.Seq + 1, Kind: store.Withdrawn})
	if s != before {
		t.Errorf("a withdrawn turn that asked nothing changed the key: %+v, was %+v", s, before)
	}
}

// A count's asking turn, withdrawn, frees the others at once too.
func TestSharedCountAskWithdrawnFreesTheOthers(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, store.Outcome{Kind: store.Answered, Counted: true, Remaining: 1, Reset: time.Second})
	if a := takeAt(&s, sharedT0, time.Minute); !a.Took {
		t.Fatalf("a turn on a count of 1: %+v, want it taken", a)
	}
	back := sharedT0.Add(time.Second)
	asker := askingTurn(t, &s, back, "the first turn past the count's reset")
	tell(&s, back, store.Outcome{Seq: asker.Seq, Kind: store.Withdrawn})
	if a := takeAt(&s, back, time.Minute); !a.Took || !a.Tell {
		t.Errorf("the turn after the asking one was withdrawn: %+v, want it taken, asking in its place", a)
	}
}

// A key the fleet paced, whose turns then met a window (a refusal asking
// for more than a second), guesses the window's quota from the turns that
// passed before the refusal: the first turn past it, in the next window,
// asks whether the window gives more, and the others wait for its
// outcome, rather than go at once and be refused with it.
func TestSharedWindowLearnedOnTheWayAsksPastTheQuotaItGuessed(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	now := sharedT0
	var last uint64
	for taken := 0; taken < 7; {
		a := takeAt(&s, now, time.Minute)
		now = now.Add(a.Wait)
		if a.Took {
			taken, last = taken+1, a.Seq
		}
	}
	a := tell(&s, now, refusal(last, 2*time.Second))
	if !a.State.Windowed || a.State.Quota != 6 {
		t.Fatalf("6 turns passed, the 7th refused asking 2s: %+v, want windowed, a quota of 6", a.State)
	}
	opens := a.State.HeldUntil
	asker := takeAt(&s, opens, time.Minute)
	tell(&s, opens, store.Outcome{Seq: asker.Seq, Kind: store.Passed})
	for i := range 5 {
		if a := takeAt(&s, opens, time.Minute); !a.Took || a.Tell {
			t.Fatalf("turn %d of the quota: %+v, want it taken, no outcome asked for", i+2, a)
		}
	}
	if a := takeAt(&s, opens, time.Minute); !a.Took || !a.Tell {
		t.Fatalf("the 7th turn, past the quota: %+v, want it taken, its outcome asked for", a)
	}
	if a := takeAt(&s, opens, time.Minute); a.Took || a.Wait != sharedAskPoll {
		t.Errorf("a turn while the 7th asks: %+v, want none, asked again in %v", a, sharedAskPoll)
	}
}

// sharedOnTheWay runs a fleet into a window it first took for a bucket:
// its first wave refused at start with a hint of a second, its turns at
// the search's pace from when the hint ends until, 400 ms on, one is
// refused, then two more, 150 ms apart: windowed. It returns the key and
// the answer to the last refusal, and when each refusal's hint ends.
func sharedOnTheWay(t *testing.T, start time.Time) (*Shared, store.LearnAnswer, []time.Time) {
	t.Helper()
	s := new(Shared)
	tell(s, start, store.Outcome{Kind: store.Refused, Hint: time.Second, Passed: 50})
	now := start.Add(time.Second)
	var last uint64
	for now.Before(start.Add(1400 * time.Millisecond)) {
		a := takeAt(s, now, time.Minute)
		now = now.Add(a.Wait)
		if a.Took {
			last = a.Seq
		}
	}
	var a store.LearnAnswer
	var targets []time.Time
	for i := range 3 {
		if i > 0 {
			now = now.Add(150 * time.Millisecond)
			turn := takeAt(s, now, time.Minute)
			for !turn.Took {
				now = now.Add(turn.Wait)
				turn = takeAt(s, now, time.Minute)
			}
			last = turn.Seq
		}
		a = tell(s, now, refusal(last, time.Second))
		targets = append(targets, now.Add(time.Second))
	}
	if !a.State.Windowed {
		t.Fatalf("three refusals in a row after the turns passed: %+v, want windowed", a.State)
	}
	return s, a, targets
}

// A window a fleet found on the way, its turns let through from the turn
// the first wave's hint said until one was refused amid the window, is
// held to the turn that first hint says, a second on, not to the later
// one the hints of its refusals say: that would keep the fleet's turns
// late by most of a window for good.
func TestSharedWindowFoundOnTheWayTurnsWhenTheFirstHintSaid(t *testing.T) {
	_, a, targets := sharedOnTheWay(t, sharedT0)
	if want := sharedT0.Add(2 * time.Second); !a.State.HeldUntil.Equal(want) {
		t.Errorf("held until %v, want %v, a second after the first wave's hint ended (its refusals' hints say %v)",
			a.State.HeldUntil.Sub(sharedT0), want.Sub(sharedT0), targets[0].Sub(sharedT0))
	}
}

// The turn an earlier hint said, refused before anything of the window
// passed, was not a turn yet: the fleet goes back to the one the hints of
// the refusals that showed the window said.
func TestSharedWindowTurnAnEarlierHintSaidRefusedGoesBackToTheLater(t *testing.T) {
	s, a, targets := sharedOnTheWay(t, sharedT0)
	opens := a.State.HeldUntil
	asker := takeAt(s, opens, time.Minute)
	if !asker.Took || !asker.Tell {
		t.Fatalf("the first turn at %v: %+v, want it taken, asking", opens.Sub(sharedT0), asker)
	}
	a = tell(s, opens, refusal(asker.Seq, time.Second))
	if !a.State.HeldUntil.Equal(targets[0]) {
		t.Fatalf("the turn refused: held until %v, want %v, the first the refusals that showed the window said",
			a.State.HeldUntil.Sub(sharedT0), targets[0].Sub(sharedT0))
	}
	// The window reopens there, and a second later: its period is that
	// second, not the time since the turn refused, which was no turn.
	// Measured from it, a period of 400 ms sent every turn after early,
	// refused whole (1.34 of the least time on loopback).
	window := func(at time.Time) store.LearnAnswer {
		t.Helper()
		first := takeAt(s, at, time.Minute)
		if !first.Took {
			t.Fatalf("the first turn at %v: %+v, want it taken", at.Sub(sharedT0), first)
		}
		tell(s, at, store.Outcome{Seq: first.Seq, Kind: store.Passed})
		for {
			turn := takeAt(s, at, time.Minute)
			if !turn.Took {
				return turn
			}
			if turn.Tell {
				return tell(s, at.Add(5*time.Millisecond), refusal(turn.Seq, time.Second))
			}
		}
	}
	a = window(targets[0])
	second := a.State.HeldUntil
	if a = window(second); a.Took {
		t.Fatalf("the second window: a turn past its quota taken: %+v", a)
	}
	if a.Wait < 900*time.Millisecond {
		t.Errorf("the quota of the window at %v spent: the next turn in %v, want about a second, the period", second.Sub(sharedT0), a.Wait)
	}
}

// A count one replica reads is what every replica takes from: the turns
// taken since consume it, and when none is left the key waits for the
// reset; a higher count of an earlier turn is stale and left alone.
func TestSharedCountIsTakenFromByTheFleet(t *testing.T) {
	var s Shared
	count := store.Outcome{Kind: store.Answered, Counted: true, Remaining: 3, Reset: time.Second}
	if a := tell(&s, sharedT0, count); !a.Paced || !a.State.Counted {
		t.Fatalf("after a count: %+v, want the key paced by it", a)
	}
	var seqs []uint64
	for range 3 {
		a := takeAt(&s, sharedT0, time.Minute)
		if !a.Took || a.Wait != 0 {
			t.Fatalf("a turn on a count of 3: %+v, want it taken now", a)
		}
		seqs = append(seqs, a.Seq)
	}
	if a := takeAt(&s, sharedT0, time.Minute); a.Took || a.Wait != time.Second {
		t.Fatalf("a fourth turn on a count of 3: %+v, want none until the reset, 1s on", a)
	}
	// The answer to the first turn comes late: it counts 2 left, which
	// the turns since took.
	stale := store.Outcome{Seq: seqs[0], Kind: store.Answered, Counted: true, Remaining: 2, Reset: time.Second}
	now := sharedT0.Add(20 * time.Millisecond)
	tell(&s, now, store.Outcome{Seq: seqs[2], Kind: store.Answered, Counted: true, Remaining: 0, Reset: time.Second})
	tell(&s, now, stale)
	if a := takeAt(&s, now, time.Minute); a.Took {
		t.Errorf("after a stale count of 2 from turn %d: %+v, want none: the count of turn %d said 0", seqs[0], a, seqs[2])
	}
	if a := takeAt(&s, sharedT0.Add(time.Second), time.Minute); !a.Took || !a.Tell {
		t.Errorf("at the reset: %+v, want a turn that asks for the new count", a)
	}
}

// Replicas tell what passed before they found the key paced: the sum is
// the first window's quota, so that a window that gives back less at its
// first turn is not taken for a small fixed one.
func TestSharedFirstWindowQuotaIsWhatTheFleetLetThrough(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, store.Outcome{Kind: store.Refused, Hint: 2 * time.Second, Passed: 20})
	a := tell(&s, sharedT0, store.Outcome{Kind: store.Unpaced, Passed: 30})
	if a.State.Quota != 50 {
		t.Errorf("two replicas let 20 and 30 through: quota %d, want 50", a.State.Quota)
	}
}

// A window whose quota is not confirmed yet, its turns let go in one
// instant: the refusal of one taken before others that passed says the
// window gave every turn but it, not the turns before it. Read as those,
// a window of 10 refused at its 6th turn gave 5, less than three
// quarters of 10: the key was taken for a sliding window's and paced at
// what the last window gave over its length.
func TestSharedWindowGaveEveryTurnButTheRefusedOne(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, store.Outcome{Kind: store.Refused, Hint: 2 * time.Second, Passed: 10})
	opens := sharedT0.Add(2 * time.Second)
	seqs := reopenedTurns(t, &s, opens, 10)
	now := opens.Add(time.Millisecond)
	a := tell(&s, now, refusal(seqs[4], 2*time.Second))
	if !a.State.Windowed || a.State.Quota != 10 || a.State.HeldUntil != now.Add(2*time.Second) {
		t.Fatalf("the 6th turn of 11 refused first: %+v, want still windowed, a quota of the 10 others, held 2s", a.State)
	}
	if a := tell(&s, now, refusal(seqs[9], 2*time.Second)); a.State.Quota != 9 {
		t.Errorf("the 11th refused after it: quota %d, want 9", a.State.Quota)
	}
}

// A blind verdict gives the pace back for blindHoldStart, then the key
// learns again from its next refusal.
func TestSharedBlindGoesUnpacedForAWhile(t *testing.T) {
	var s Shared
	tell(&s, sharedT0, refusal(0, 0))
	if a := tell(&s, sharedT0, store.Outcome{Kind: store.Blind}); a.Paced || !a.State.Blind {
		t.Fatalf("after a blind verdict: %+v, want unpaced and blind", a)
	}
	if a := tell(&s, sharedT0.Add(time.Second), refusal(0, 0)); a.Paced {
		t.Errorf("a refusal while blind: %+v, want it to teach nothing", a)
	}
	if a := tell(&s, sharedT0.Add(blindHoldStart), refusal(0, 0)); !a.Paced || math.IsInf(a.State.Rate, 1) {
		t.Errorf("a refusal once the hold is over: %+v, want the key paced again", a)
	}
}

// A window turns within moments of its last count: the new window's
// counts, higher, are its own, not older news to leave for the lowest.
// Left, the first of them taken was the new window's last (1 of 50
// left), read as a sliding window that gave back little at its turn, and
// the fleet paced its refill inside the window, refused at every turn
// (one transport with a store against a fixed window with a Unix reset
// failed calls in about one run in 200).
func TestSharedNewWindowsCountIsItsOwn(t *testing.T) {
	var s Shared
	counted := func(seq uint64, remaining int, reset time.Duration) store.Outcome {
		return store.Outcome{Seq: seq, Kind: store.Answered, Counted: true, Remaining: remaining, Limit: 50, Reset: reset}
	}
	tell(&s, sharedT0, counted(0, 3, time.Second))
	var seqs []uint64
	for range 3 {
		seqs = append(seqs, takeAt(&s, sharedT0, time.Minute).Seq)
	}
	turn := sharedT0.Add(time.Second)
	tell(&s, turn.Add(-2*time.Millisecond), counted(seqs[2], 0, 2*time.Millisecond))
	// The window turned; its counts come at once, the highest first.
	var next []uint64
	for range 3 {
		a := takeAt(&s, turn, time.Minute)
		if !a.Took || a.Wait != 0 {
			t.Fatalf("at the window's turn: %+v, want a turn now", a)
		}
		next = append(next, a.Seq)
	}
	tell(&s, turn, counted(next[0], 49, time.Second), counted(next[1], 48, time.Second), counted(next[2], 1, time.Second))
	if a := takeAt(&s, turn, time.Minute); !a.Took || a.Wait != 0 {
		t.Errorf("after the new window's count of 1 left: %+v, want its last turn now", a)
	}
	// The refill limit/reset would promise is tried once, and refused: a
	// window's, which refills nothing until its reset.
	at, tried := turn, takeAt(&s, turn, time.Minute)
	for i := 0; !tried.Took && i < 3; i++ {
		at = at.Add(tried.Wait)
		tried = takeAt(&s, at, time.Minute)
	}
	if !tried.Took || at.Sub(turn) > 100*time.Millisecond {
		t.Fatalf("the try of the refill, %v after the turn: %+v, want a turn then", at.Sub(turn), tried)
	}
	tell(&s, at, store.Outcome{Seq: tried.Seq, Kind: store.Refused, Counted: true, Remaining: 0, Limit: 50, Reset: turn.Add(time.Second).Sub(at)})
	if a := takeAt(&s, at, time.Minute); a.Took || at.Add(a.Wait).Before(turn.Add(time.Second)) {
		t.Errorf("after the refill's refusal: %+v, want no turn until the window's reset, %v on", a, turn.Add(time.Second).Sub(at))
	}
}

// Turns sent together reach the server in another order than taken: a
// count of a window whose turn the counts saw is read for the turns it
// saw, not for its turn's number. Twenty turns of a window of 50 on
// their way, the count of the 4th, which the server saw last, says 30
// left (read by its number, 14: the key was held for the reset with
// half the window unused, one transport with a store on ulule/limiter
// took 1.3 to 2 times the least time on loopback); the count of the
// 20th, seen 5th, says 45 (read by its number, 45, and 15 refusals).
// Both leave the 30 the fleet has not taken.
func TestSharedCountReadsTheTurnsItSaw(t *testing.T) {
	counted := func(seq uint64, remaining int, reset time.Duration) store.Outcome {
		return store.Outcome{Seq: seq, Kind: store.Answered, Counted: true, Remaining: remaining, Limit: 50, Reset: reset}
	}
	for _, c := range []struct {
		name      string
		nth, left int
	}{
		{"the 4th turn, seen last", 4, 30},
		{"the 20th turn, seen 5th", 20, 45},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s Shared
			tell(&s, sharedT0, counted(0, 3, time.Second))
			var last uint64
			for range 3 {
				last = takeAt(&s, sharedT0, time.Minute).Seq
			}
			turn := sharedT0.Add(time.Second)
			tell(&s, turn.Add(-2*time.Millisecond), counted(last, 0, 2*time.Millisecond))
			first := takeAt(&s, turn, time.Minute)
			if !first.Took || first.Wait != 0 {
				t.Fatalf("at the window's turn: %+v, want a turn now", first)
			}
			tell(&s, turn, counted(first.Seq, 49, time.Second))
			seqs := []uint64{first.Seq}
			for range 19 {
				a := takeAt(&s, turn, time.Minute)
				if !a.Took || a.Wait != 0 {
					t.Fatalf("a turn of the new window: %+v, want it now", a)
				}
				seqs = append(seqs, a.Seq)
			}
			tell(&s, turn, counted(seqs[c.nth-1], c.left, time.Second))
			took := 0
			for ; took < 50; took++ {
				if a := takeAt(&s, turn, time.Minute); !a.Took {
					break
				}
			}
			if took != 30 {
				t.Errorf("after the count of the %dth turn, %d left: %d more turns now, want the 30 the fleet has not taken", c.nth, c.left, took)
			}
		})
	}
}

// A higher count of a turn sent with the one counted is no refill: the
// two reached the server in either order, and a replica tells its count
// with its next ask, late. Read as a refill (it came more than
// countSettle after), it made ulule/limiter's window a bucket, paced at
// what the counts measured and refused at every turn until the reset, on
// loopback.
func TestSharedCountOfATurnSentTogetherIsNoRefill(t *testing.T) {
	counted := func(seq uint64, kind store.OutcomeKind, remaining int, reset time.Duration) store.Outcome {
		return store.Outcome{Seq: seq, Kind: kind, Counted: true, Remaining: remaining, Limit: 50, Reset: reset}
	}
	var s Shared
	tell(&s, sharedT0, counted(0, store.Answered, 2, time.Second))
	first, second := takeAt(&s, sharedT0, time.Minute), takeAt(&s, sharedT0, time.Minute)
	if !first.Took || !second.Took {
		t.Fatalf("two turns on a count of 2: %+v, %+v, want both now", first, second)
	}
	at := sharedT0.Add(time.Millisecond)
	tell(&s, at, counted(first.Seq, store.Refused, 0, time.Second-time.Millisecond))
	later := sharedT0.Add(25 * time.Millisecond)
	tell(&s, later, counted(second.Seq, store.Answered, 1, time.Second-25*time.Millisecond))
	// Before the reset, the refill limit/reset would promise is tried
	// once, and refused: a window's, as the first count said.
	reset, tried := sharedT0.Add(time.Second), 0
	for now := later; now.Before(reset); {
		a := takeAt(&s, now, time.Minute)
		if a.Took {
			tried++
			tell(&s, now, counted(a.Seq, store.Refused, 0, reset.Sub(now)))
			continue
		}
		now = now.Add(max(a.Wait, time.Millisecond))
	}
	if tried != 1 {
		t.Errorf("after the count of 1 of a turn sent with the refused one: %d turns before the reset, all refused, want the one that tries the refill", tried)
	}
}

// A refusal the count explains (none left) waits for the count, not for
// its hint: the hint does not pause the fleet (HintsOverstate), as a
// Pacer's does not. httprate's sliding window says Retry-After of its
// whole window, 10 s, where its count lets a request go a third of a
// second on; paused on, a transport with a store held its key 10 s, 1.4
// to 1.95 of the least time in 3 loopback runs of 5. A refusal no count
// explains still pauses it.
func TestSharedCountedRefusalDoesNotPauseOnItsHint(t *testing.T) {
	var s Shared
	count := store.Outcome{Kind: store.Answered, Counted: true, Remaining: 1, Limit: 30, Reset: 9 * time.Second}
	tell(&s, sharedT0, count)
	turn := takeAt(&s, sharedT0, time.Minute)
	a := tell(&s, sharedT0, store.Outcome{Seq: turn.Seq, Kind: store.Refused, Hint: 10 * time.Second,
		Counted: true, Remaining: 0, Limit: 30, Reset: 9 * time.Second})
	if !a.HintsOverstate {
		t.Errorf("after a refusal the count explains: %+v, want its hint not to pause the key", a)
	}
	turn = takeAt(&s, sharedT0.Add(9*time.Second), time.Minute)
	a = tell(&s, sharedT0.Add(9*time.Second), store.Outcome{Seq: turn.Seq, Kind: store.Refused, Hint: 10 * time.Second})
	if a.HintsOverstate {
		t.Errorf("after a refusal no count explains: %+v, want its hint to pause the key", a)
	}
}

// A refusal of a turn already on its way when the count was told was
// taken on no promise of the refill limit/reset bounds: it does not
// show that bound wrong. Read as showing it, a bucket whose reset says
// its time to fill in whole seconds (throttled's GCRA) was taken for a
// window of its burst a second, 5 times the least time in 2 loopback
// runs of 6 of one transport with a store.
func TestSharedRefusalOnItsWayKeepsTheRefillBound(t *testing.T) {
	counted := func(seq uint64, kind store.OutcomeKind, remaining int) store.Outcome {
		return store.Outcome{Seq: seq, Kind: kind, Counted: true, Remaining: remaining, Limit: 10, Reset: time.Second}
	}
	var s Shared
	tell(&s, sharedT0, counted(0, store.Answered, 5))
	var seqs []uint64
	for range 5 {
		seqs = append(seqs, takeAt(&s, sharedT0, time.Minute).Seq)
	}
	at := sharedT0.Add(time.Millisecond)
	tell(&s, at, counted(seqs[0], store.Answered, 0))
	// The third turn was on its way when the count of the first, none
	// left, was told: its refusal says nothing of the refill.
	tell(&s, at, counted(seqs[2], store.Refused, 0))
	a := takeAt(&s, at, time.Minute)
	if a.Took || a.Wait >= 900*time.Millisecond {
		t.Errorf("after a refusal of a turn on its way: %+v, want a turn on the refill 10/1s bounds, before the reset", a)
	}
}

// A fleet's window it left unused for a while, then a turn that gave less
// than its quota: the key is paced at what the last window gave over the
// hint that held it, as a Pacer is (TestAdaptiveSlidingSeedIsNotSlowedByAnIdleTurn).
func TestSharedSlidingSeedIsNotSlowedByAnIdleTurn(t *testing.T) {
	var s Shared
	const hint = 10 * time.Second
	tell(&s, sharedT0, store.Outcome{Kind: store.Refused, Hint: hint, Passed: 30})
	// turns takes n turns at now, each let through, and one more the
	// server refuses with a hint of 10s.
	turns := func(now time.Time, n int) store.LearnAnswer {
		for i := range n + 1 {
			a := takeAt(&s, now, time.Minute)
			if !a.Took || a.Wait != 0 {
				t.Fatalf("turn %d at %v: %+v, want it taken now", i+1, now.Sub(sharedT0), a)
			}
			if i == n {
				return tell(&s, now, refusal(a.Seq, hint))
			}
			tell(&s, now, store.Outcome{Seq: a.Seq, Kind: store.Passed})
		}
		panic("unreachable")
	}
	// The window turns: one turn, then nothing for two minutes, then the
	// rest of the quota and its refusal.
	opens := sharedT0.Add(hint)
	a := takeAt(&s, opens, time.Minute)
	tell(&s, opens, store.Outcome{Seq: a.Seq, Kind: store.Passed})
	later := opens.Add(2 * time.Minute)
	if a := turns(later, 28); a.State.Quota != 29 {
		t.Fatalf("the window's refusal: %+v, want a quota of 29", a.State)
	}
	// The next turn gives 2: a sliding window.
	a = turns(later.Add(hint), 2)
	if got, low := a.State.Rate, 28/10.0; a.State.Windowed || math.Abs(got-low) > 1e-9 {
		t.Errorf("once no window: %+v, want paced at %.3f/s: 29 over the 10s the hint held the key, not over the 2m the fleet left the turn unused", a.State, low)
	}
}

// A fleet paced by the counts of a sliding-window counter (as go-chi's
// httprate keeps one), which says none is left while it lets 50 a second through: the refill the counts
// measure keeps the turns at the server's rate, and when the count the
// measure spans from is replaced, the next measure spans long enough
// too. (Replaced by the last count, 20ms old, it measured nothing: a turn
// went at once, was refused, and its hint of the whole window held the
// key a second, every 4 seconds.)
func TestSharedCountRefillSurvivesItsSampleReplaced(t *testing.T) {
	var s Shared
	const limit = 50
	server := learntest.SlidingCounter{Limit: limit}
	now := sharedT0
	answer := func(seq uint64) store.Outcome { return server.Answer(seq, now) }
	refused, passed := 0, 0
	var told []store.Outcome // told with the next turn asked for, as a transport does
	for now.Before(sharedT0.Add(20 * time.Second)) {
		a := s.Learn(now, &store.LearnAsk{Take: true, MaxWait: time.Minute, Outcomes: told})
		told = nil
		if a.Paced && !a.Took {
			now = now.Add(a.Wait)
			continue
		}
		o := answer(a.Seq)
		switch {
		case o.Kind != store.Refused:
			passed++
		case now.After(sharedT0.Add(3 * time.Second)):
			refused++
		}
		told = append(told, o)
	}
	if refused > 0 {
		t.Errorf("%d turns refused after the first 3s (%d passed), want none: the count's refill kept", refused, passed)
	}
	if want := 19 * limit; passed < want {
		t.Errorf("%d turns passed in 20s, want %d at least: the server's 50 a second", passed, want)
	}
}

// A count whose window turned unseen says nothing of the order of its
// turns: a bucket whose reset, rounded up to the second, never passes
// tells the same count after every turn, its window never turns in the
// store's view, and the turns the fleet took since the one it saw turn
// grew past its limit. Read as the turns of one window the server saw,
// they left nothing, and the key went a turn a second, at the reset of
// each count (48.8 of the least time in 1 run of 90, one transport with
// a store, under the race detector).
func TestSharedCountOfAWindowTurnedUnseenKeepsItsOrder(t *testing.T) {
	counted := func(seq uint64, remaining int) store.Outcome {
		return store.Outcome{Seq: seq, Kind: store.Answered, Counted: true, Remaining: remaining, Limit: 10, Reset: time.Second}
	}
	var s Shared
	tell(&s, sharedT0, counted(0, 0))
	now := sharedT0.Add(time.Second + time.Millisecond) // the reset passed
	first := takeAt(&s, now, time.Minute)
	if !first.Took {
		t.Fatalf("after the reset: %+v, want a turn", first)
	}
	tell(&s, now, counted(first.Seq, 9)) // grown after the reset: the window turned
	for i := range 30 {
		now = now.Add(20 * time.Millisecond) // 50 a second: the bucket refilled the one taken
		a := takeAt(&s, now, time.Minute)
		// Ten turns since the window turned, one seen: those on their way
		// may take the nine left, and the eleventh waits a little. Once
		// more went than the window holds, the count is a later one's.
		for waited := time.Duration(0); !a.Took && a.Wait <= 20*time.Millisecond && waited < 20*time.Millisecond; {
			now, waited = now.Add(a.Wait), waited+a.Wait
			a = takeAt(&s, now, time.Minute)
		}
		if !a.Took || a.Wait != 0 {
			t.Fatalf("turn %d, 9 of 10 left: %+v, want it within 20ms", i+2, a)
		}
		tell(&s, now, counted(a.Seq, 9))
	}
}
