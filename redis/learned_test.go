package redis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/internal/learn/learntest"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// TestLearnMatchesTheReference drives the script and internal/learn's
// Shared, which ratewise.MemoryStore runs, through the same asks at the
// same instants, drawn at random (turns taken and refused, hints from
// none to a window's, ceilings, blind verdicts, and in every other run
// counts of the server's quota), and wants the same answers from both,
// but for the rounding of a float to a nanosecond.
func TestLearnMatchesTheReference(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	s := New(client, Options{})
	ctx := context.Background()
	seen := map[string]int{}
	for run := range 40 {
		seed := uint64(run)
		rng := rand.New(rand.NewPCG(seed, seed*7+1))
		key := fmt.Sprintf("ref-%d", run)
		var ref learn.Shared
		start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		now := start
		var seq uint64
		tell, kept, windowAsked := false, false, false
		for step := range 400 {
			now = now.Add(time.Duration(rng.Int64N(int64(60 * time.Millisecond))))
			if rng.IntN(40) == 0 {
				now = now.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
			}
			ask := drawAsk(rng, seq, tell, run%2 == 1)
			// As a store, the reference keeps nothing of a key until a
			// refusal or a count teaches it something.
			var want store.LearnAnswer
			if kept = kept || teaches(&ask); kept {
				want = ref.Learn(now, &ask)
			}
			var got store.LearnAnswer
			if want.Paced || len(ask.Outcomes) > 0 || step%7 == 0 {
				var err error
				// Seconds since a minute before the run: a float keeps them
				// to the nanosecond.
				got, err = s.learnAt(ctx, key, &ask, now.Sub(start).Seconds()+60)
				if err != nil {
					t.Fatalf("run %d step %d: %v", run, step, err)
				}
			} else {
				got = want // nothing to learn: the script is asked now and then only
			}
			if diff := answerDiff(got, want, now); diff != "" {
				t.Fatalf("run %d step %d at %v, ask %+v: %s\nscript:    %+v\nreference: %+v", run, step, now.Format("15:04:05.000"), ask, diff, got, want)
			}
			for _, o := range ask.Outcomes {
				if o.Kind == store.Withdrawn && windowAsked {
					seen["a window's asking turn withdrawn"]++
				}
			}
			seq = max(seq, want.Seq)
			tell, windowAsked = want.Tell, want.Tell && want.State.Windowed
			switch {
			case want.State.Counted && want.Took:
				seen["a turn a count allowed"]++
			case want.State.Counted && want.Wait > 0:
				seen["a count's wait"]++
			case want.Tell:
				seen["a window's first turn asking"]++
			case want.State.Windowed && want.State.Quota > 0 && want.Took:
				seen["a turn of a window whose quota is known"]++
			case want.State.Blind:
				seen["blind"]++
			case want.Took && want.Wait > 0:
				seen["a turn of the pace reserved ahead"]++
			case want.Paced && !want.Took && want.Wait > 0:
				seen["held"]++
			}
		}
	}
	// The draws must reach every way of answering, or they test less.
	for _, way := range []string{"a turn a count allowed", "a count's wait", "a window's first turn asking", "a turn of a window whose quota is known", "blind",
		"a turn of the pace reserved ahead", "held", "a window's asking turn withdrawn"} {
		if seen[way] < 5 {
			t.Errorf("the draws reached %q %d times, want 5 at least: %v", way, seen[way], seen)
		}
	}
}

// teaches reports whether ask may teach a key that learned nothing: it
// tells a refusal, or a count of the server's quota.
func teaches(ask *store.LearnAsk) bool {
	for _, o := range ask.Outcomes {
		if o.Kind == store.Refused || o.Counted {
			return true
		}
	}
	return false
}

// drawCount puts in o a count of the server's quota drawn at random.
func drawCount(rng *rand.Rand, o *store.Outcome) {
	o.Counted, o.Remaining = true, rng.IntN(12)
	if rng.IntN(2) == 0 {
		o.Limit = 10 + rng.IntN(3)*20
	}
	if rng.IntN(4) != 0 {
		o.Reset = time.Duration(rng.Int64N(int64(2 * time.Second)))
	}
	o.ResetDue = rng.IntN(10) == 0
}

// drawAsk draws an ask of a transport that has seen turns up to seq,
// the last of them asking for its outcome when tell is set; counts says
// the server counts its quota in its answers.
func drawAsk(rng *rand.Rand, seq uint64, tell, counts bool) store.LearnAsk {
	ask := store.LearnAsk{Take: rng.IntN(4) != 0, MaxWait: time.Duration(rng.IntN(3000)) * time.Millisecond}
	if rng.IntN(5) == 0 {
		ask.Ceiling = float64(5 + rng.IntN(100))
	}
	if tell && rng.IntN(3) != 0 {
		kind := store.Passed
		if rng.IntN(4) == 0 {
			kind = store.Withdrawn // held by a pause instead of sent
		}
		ask.Outcomes = append(ask.Outcomes, store.Outcome{Seq: seq, Kind: kind})
	}
	if counts && rng.IntN(3) == 0 {
		// The count an answer carried, told with the next ask.
		o := store.Outcome{Seq: seq, Kind: store.Answered}
		if rng.IntN(8) != 0 {
			drawCount(rng, &o)
		}
		ask.Outcomes = append(ask.Outcomes, o)
	}
	hints := []time.Duration{0, 0, 500 * time.Millisecond, time.Second, time.Second, 2 * time.Second, 10 * time.Second}
	n := 0
	switch r := rng.IntN(20); {
	case r < 4:
		n = 1
	case r == 4:
		n = 2
	}
	for range n {
		o := store.Outcome{Kind: store.Refused, Hint: hints[rng.IntN(len(hints))]}
		if seq > 0 && rng.IntN(4) != 0 {
			o.Seq = seq - uint64(rng.IntN(int(min(seq, 5))))
		}
		if o.Seq == 0 && rng.IntN(2) == 0 {
			o.Passed = rng.IntN(40)
		}
		if counts && rng.IntN(2) == 0 {
			drawCount(rng, &o)
		}
		switch rng.IntN(100) {
		case 0:
			o.Kind = store.Blind
		case 5, 6:
			o.Kind = store.Unpaced
		case 1, 2:
			o.Kind = store.Rated
		case 3, 4:
			o.Kind = store.Undecided
		}
		ask.Outcomes = append(ask.Outcomes, o)
	}
	return ask
}

// answerDiff says how got differs from want, "" when it does not but for
// a float rounded to a nanosecond.
func answerDiff(got, want store.LearnAnswer, now time.Time) string {
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }
	durClose := func(a, b time.Duration) bool { return (a - b).Abs() <= 2*time.Microsecond }
	wantHeld := time.Duration(0)
	if !want.State.HeldUntil.IsZero() {
		wantHeld = want.State.HeldUntil.Sub(now)
	}
	gotHeld := time.Duration(0)
	if !got.State.HeldUntil.IsZero() {
		gotHeld = time.Until(got.State.HeldUntil)
	}
	switch {
	case got.Paced != want.Paced, got.Took != want.Took, got.Seq != want.Seq, got.Tell != want.Tell:
		return "paced, took, seq or tell differ"
	case got.HintsOverstate != want.HintsOverstate:
		return "hints overstate differs"
	case got.State.Windowed != want.State.Windowed, got.State.Quota != want.State.Quota, got.State.Blind != want.State.Blind:
		return "state differs"
	case !durClose(got.Wait, want.Wait):
		return fmt.Sprintf("wait %v, want %v", got.Wait, want.Wait)
	case !close(got.Rate, want.Rate), !close(got.State.Rate, want.State.Rate):
		return "rate differs"
	case (gotHeld - wantHeld).Abs() > 50*time.Millisecond:
		return fmt.Sprintf("held %v, want %v", gotHeld, wantHeld)
	}
	return ""
}

// A window the fleet left unused for two minutes, then a turn that gave
// less than its quota: the script, as the reference, paces the key at
// what the last window gave over the hint that held it (the case of
// learn's TestSharedSlidingSeedIsNotSlowedByAnIdleTurn, which the random
// draws above do not reach).
func TestLearnScriptSeedsASlidingWindowFromItsHint(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ask := mirrored(t, start)
	const hint = 10 * time.Second
	take := store.LearnAsk{Take: true, MaxWait: time.Minute}
	// turns takes n turns at now, each let through, and one more the
	// server refuses with the hint.
	turns := func(now time.Time, n int) store.LearnAnswer {
		t.Helper()
		for i := range n + 1 {
			a := ask(now, take)
			if !a.Took {
				t.Fatalf("turn %d at %v: %+v, want it taken", i+1, now.Sub(start), a)
			}
			if i == n {
				return ask(now, store.LearnAsk{Outcomes: []store.Outcome{{Seq: a.Seq, Kind: store.Refused, Hint: hint}}})
			}
			ask(now, store.LearnAsk{Outcomes: []store.Outcome{{Seq: a.Seq, Kind: store.Passed}}})
		}
		panic("unreachable")
	}
	ask(start, store.LearnAsk{Outcomes: []store.Outcome{{Kind: store.Refused, Hint: hint, Passed: 30}}})
	opens := start.Add(hint)
	a := ask(opens, take)
	ask(opens, store.LearnAsk{Outcomes: []store.Outcome{{Seq: a.Seq, Kind: store.Passed}}})
	later := opens.Add(2 * time.Minute)
	turns(later, 28)
	a = turns(later.Add(hint), 2)
	if low := 28 / 10.0; a.State.Windowed || math.Abs(a.State.Rate-low) > 1e-6 {
		t.Errorf("once no window: %+v, want paced at %.3f/s, 29 over the 10s hint", a.State, low)
	}
}

// A fleet paced at a search that climbed for 300 ms, every turn let
// through, then refused three times in some 55 ms, each turn sent after
// the last refusal: shorter than the dry span, but over three intervals
// of the rate the server let turns through at before, so the server
// refilled nothing a bucket at that rate would have. The script, as the
// reference, takes the key for a window's (windowDry).
func TestLearnScriptReadsADryStreakByTheRefillShown(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ask := mirrored(t, start)
	take := store.LearnAsk{Take: true, MaxWait: time.Minute}
	ask(start, store.LearnAsk{Outcomes: []store.Outcome{{Kind: store.Refused}}})
	now := start
	var last store.LearnAnswer
	for now.Before(start.Add(300 * time.Millisecond)) {
		a := ask(now, take)
		now = now.Add(a.Wait)
		if a.Took {
			last = a
		}
	}
	refuse := func(seq uint64) store.LearnAnswer {
		return ask(now, store.LearnAsk{Outcomes: []store.Outcome{{Seq: seq, Kind: store.Refused, Hint: time.Second}}})
	}
	a := refuse(last.Seq)
	for range 2 {
		var turn store.LearnAnswer
		for !turn.Took {
			turn = ask(now, take)
			now = now.Add(turn.Wait)
		}
		now = now.Add(20 * time.Millisecond) // its answer
		a = refuse(turn.Seq)
	}
	if !a.State.Windowed {
		t.Errorf("three refusals of turns sent one after the other, after %d let through in 300 ms: %+v, want windowed", last.Seq, a.State)
	}
}

// A window the fleet found on the way, as in learn's
// TestSharedWindowFoundOnTheWayTurnsWhenTheFirstHintSaid: the script,
// as the reference, holds the key to the turn the first wave's hint
// said, a second on, and, that turn refused, to the later one.
func TestLearnScriptTurnsWhenTheFirstHintSaid(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ask := mirrored(t, start)
	take := store.LearnAsk{Take: true, MaxWait: time.Minute}
	refuse := func(now time.Time, seq uint64) store.LearnAnswer {
		return ask(now, store.LearnAsk{Outcomes: []store.Outcome{{Seq: seq, Kind: store.Refused, Hint: time.Second}}})
	}
	ask(start, store.LearnAsk{Outcomes: []store.Outcome{{Kind: store.Refused, Hint: time.Second, Passed: 50}}})
	now := start.Add(time.Second)
	var last uint64
	for now.Before(start.Add(1400 * time.Millisecond)) {
		a := ask(now, take)
		now = now.Add(a.Wait)
		if a.Took {
			last = a.Seq
		}
	}
	a := refuse(now, last)
	for range 2 {
		now = now.Add(150 * time.Millisecond)
		turn := ask(now, take)
		for !turn.Took {
			now = now.Add(turn.Wait)
			turn = ask(now, take)
		}
		a = refuse(now, turn.Seq)
	}
	if !a.State.Windowed {
		t.Fatalf("three refusals in a row after the turns passed: %+v, want windowed", a.State)
	}
	opens := start.Add(2 * time.Second)
	asker := ask(opens, take)
	if !asker.Took || !asker.Tell {
		t.Fatalf("the first turn at the turn the first hint said: %+v, want it taken, asking", asker)
	}
	a = refuse(opens, asker.Seq)
	if !a.State.Windowed || a.State.HeldUntil.IsZero() {
		t.Fatalf("that turn refused: %+v, want held to the later turn", a.State)
	}
	// Two windows more: the period the second measures is from the
	// first, not from the turn refused (the answers are compared turn by
	// turn, the waits with them).
	window := func(at time.Time) store.LearnAnswer {
		t.Helper()
		first := ask(at, take)
		ask(at, store.LearnAsk{Outcomes: []store.Outcome{{Seq: first.Seq, Kind: store.Passed}}})
		for range 200 {
			turn := ask(at, take)
			switch {
			case !turn.Took:
				return turn
			case turn.Tell:
				return refuse(at.Add(5*time.Millisecond), turn.Seq)
			}
		}
		t.Fatalf("at %v: the window never closed", at.Sub(start))
		return store.LearnAnswer{}
	}
	// The script's HeldUntil is on the real clock: how long it holds is
	// the same on the test's.
	next := opens.Add(time.Until(a.State.HeldUntil) + 10*time.Millisecond)
	a = window(next)
	next = next.Add(5*time.Millisecond + time.Until(a.State.HeldUntil) + 10*time.Millisecond)
	if a = window(next); a.Took || a.Wait < 900*time.Millisecond {
		t.Errorf("the second window's quota spent: %+v, want the next turn about a second on, the period", a)
	}
}

// mirrored returns a function that asks the script and the reference
// (learn.Shared) the same of one key at now, fails the test where their
// answers differ, and returns the script's. Times are sent as seconds
// since a minute before start.
func mirrored(t *testing.T, start time.Time) func(now time.Time, a store.LearnAsk) store.LearnAnswer {
	srv := redistest.Start(t)
	client := srv.Client()
	t.Cleanup(func() { client.Close() })
	s := New(client, Options{})
	var ref learn.Shared
	return func(now time.Time, a store.LearnAsk) store.LearnAnswer {
		t.Helper()
		want := ref.Learn(now, &a)
		got, err := s.learnAt(context.Background(), "mirrored", &a, now.Sub(start).Seconds()+60)
		if err != nil {
			t.Fatal(err)
		}
		if diff := answerDiff(got, want, now); diff != "" {
			t.Fatalf("at %v, ask %+v: %s\nscript:    %+v\nreference: %+v", now.Sub(start), a, diff, got, want)
		}
		return got
	}
}

// A fleet paced by the counts of a sliding-window counter that says none
// is left while it lets 50 a second through: the script, as the
// reference, keeps measuring the refill when the count it measures from
// is replaced, and no turn is refused past the first seconds (the case
// of learn's TestSharedCountRefillSurvivesItsSampleReplaced).
func TestLearnScriptKeepsACountsRefillMeasured(t *testing.T) {
	start := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ask := mirrored(t, start)
	server := learntest.SlidingCounter{Limit: 50}
	refused, passed, stray := 0, 0, false
	for now := start; now.Before(start.Add(20 * time.Second)); {
		a := ask(now, store.LearnAsk{Take: true, MaxWait: time.Minute})
		if a.Paced && !a.Took {
			// Asked again a little past the wait: at its very end, the
			// credit the script computes in float seconds and the
			// reference in nanoseconds round either side of a turn.
			now = now.Add(a.Wait + 100*time.Microsecond)
			continue
		}
		o := server.Answer(a.Seq, now)
		if !stray && now.After(start.Add(1500*time.Millisecond)) {
			// One turn another client took: refused beyond the count, it
			// shows limit/reset no refill to count on, and the refill is
			// what the counts measure from then on.
			stray = true
			o.Kind, o.Remaining, o.Hint = store.Refused, 0, time.Second
		}
		switch {
		case o.Kind != store.Refused:
			passed++
		case now.After(start.Add(3 * time.Second)):
			refused++
		}
		ask(now, store.LearnAsk{Outcomes: []store.Outcome{o}})
	}
	if refused > 0 || passed < 19*50 {
		t.Errorf("%d turns passed in 20s, %d refused after the first 3s: want 950 at least, and none refused", passed, refused)
	}
}
