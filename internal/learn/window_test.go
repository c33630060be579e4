package learn

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestWindowCountsAnswersThatCameAfterItsRefusal: answers race. A window
// that let 50 through may have one of them answered after the refusal
// that closed it, which counted 49: that success is the window's too,
// and the quota it teaches is 50, not 49 for good. Requests sent before
// the window opened, or after it closed, are not its.
func TestWindowCountsAnswersThatCameAfterItsRefusal(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &learnedWindow{quota: 49, confirmed: true, openSeq: 100, windowTurns: windowTurns{opens: t0.Add(time.Second)}}
	const closedAt = 160
	w.succeeded(150, closedAt) // sent in the window, answered after its refusal
	if w.quota != 50 {
		t.Fatalf("quota %d after a success of the window answered late; want 50", w.quota)
	}
	w.succeeded(90, closedAt)  // sent before the window opened
	w.succeeded(170, closedAt) // sent after it closed
	if w.quota != 50 || w.used != 0 {
		t.Fatalf("quota %d, used %d after successes of other windows; want 50 and 0", w.quota, w.used)
	}
	w.opens = time.Time{} // reopened
	w.succeeded(180, closedAt)
	if w.used != 1 || w.quota != 50 {
		t.Fatalf("an open window counted used %d, quota %d; want 1 and 50", w.used, w.quota)
	}
}

// TestWindowSendsTheQuotaItGaveWhenAnswersRace drives a Pacer through
// the race on loopback: a window lets 50 requests through, but the 50th
// is answered after the refusal of the 51st, which counts 49. When the
// window reopens, the key sends 50 at once, not 49 for every turn after.
func TestWindowSendsTheQuotaItGaveWhenAnswersRace(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	// A first refusal asking for 2 s holds the key as a window's.
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: 2 * time.Second, Flight: -1}, 0, t0)
	opens := t0.Add(2 * time.Second)
	first, _ := sendAt(t, a, opens) // asks alone whether the window turned
	a.Outcome(first, succeeded, opens)
	var seqs []uint64
	for range 50 {
		seq, _ := sendAt(t, a, opens)
		seqs = append(seqs, seq)
	}
	for _, seq := range seqs[:48] {
		a.Outcome(seq, succeeded, opens)
	}
	closed := opens.Add(5 * time.Millisecond)
	a.Outcome(seqs[49], Answer{Refused: true, Remaining: -1, Hint: time.Second}, closed)
	a.Outcome(seqs[48], succeeded, closed) // the window's 50th, answered late
	reopens := a.WindowHeldUntil()
	if !reopens.After(closed) {
		t.Fatalf("the key is not held after the window's refusal (until %v)", reopens.Sub(t0))
	}
	sent := 0
	for {
		_, delay, ready, went := a.Take(reopens)
		if !went {
			if delay <= 0 && ready == nil {
				t.Fatal("Take neither sent nor said what to wait for")
			}
			break
		}
		sent++
	}
	if sent != 50 {
		t.Fatalf("the reopened window sent %d at once; want the 50 the last one gave", sent)
	}
}

// TestWindowAsksWhetherItGivesMore: a window learned from refusals takes
// the quota of the first window it saw give one, which may be what a
// sliding window had left, 2 of its 50. The key then asks whether a
// window gives more than it learned: it finds the 50 within a turn, and,
// the next window giving no more than that, asks no more, each ask having
// cost one refusal. (Without asking, the key sent 2 a window for good: 20
// times the least time of a batch.)
func TestWindowAsksWhetherItGivesMore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	// A first refusal asking for 2 s holds the key as a window's.
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: 2 * time.Second, Flight: -1}, 0, t0)
	turn := t0.Add(2 * time.Second)
	sent, refusals := serveWindow(t, a, turn, 2, turn.Add(time.Second))
	if sent != 3 || refusals != 1 {
		t.Fatalf("the first window: %d sent, %d refused; want 3 and 1", sent, refusals)
	}
	var perWindow []int
	total := 0
	for range 30 {
		turn = turn.Add(time.Second)
		at := turn
		if held := a.WindowHeldUntil(); held.After(at) {
			at = held
		}
		sent, refusals := serveWindow(t, a, at, 50, turn.Add(time.Second))
		perWindow = append(perWindow, sent-refusals)
		total += refusals
	}
	if slices.Min(perWindow[1:]) != 50 {
		t.Fatalf("let through a window: %v; want 50 from the second on", perWindow)
	}
	t.Logf("let through a window: %v; %d refusals", perWindow, total)
	if total > 2 {
		t.Fatalf("%d refusals in 30 windows of 50 (%v let through); want 2, the asks that found the 50 and settled it", total, perWindow)
	}
}

// serveWindow is a window of a server that lets gives requests through
// from now, and refuses the rest until next: the key sends what it lets
// go until then, each answered at once. It returns how many the key sent,
// and how many of them were refused.
func serveWindow(t *testing.T, a *Pacer, now time.Time, gives int, next time.Time) (sent, refusals int) {
	t.Helper()
	for range 1000 {
		seq, delay, ready, went := a.Take(now)
		if !went {
			switch {
			case delay <= 0 && ready == nil:
				t.Fatal("Take neither sent nor said what to wait for")
			case delay > 0 && now.Add(delay).Before(next):
				now = now.Add(delay)
				continue
			}
			return sent, refusals
		}
		sent++
		if sent <= gives {
			a.Outcome(seq, succeeded, now)
			continue
		}
		refusals++
		a.Outcome(seq, Answer{Refused: true, Remaining: -1, Hint: next.Sub(now)}, now)
	}
	t.Fatal("the key sent 1000 in a window")
	return sent, refusals
}

// TestWindowAskRefusedSoonerMovesThePhase: a window's turns learned from
// hints in whole seconds come late. The refusal of an ask, amid a
// window, says its turn nearer: the key comes back then, and keeps the
// period it learned, rather than taking the shorter wait for a shorter
// period, which would send the next windows' quotas before their turns.
func TestWindowAskRefusedSoonerMovesThePhase(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: 2 * time.Second, Flight: -1}, 0, t0)
	turn := t0.Add(2 * time.Second)
	serveWindow(t, a, turn, 2, turn.Add(time.Second)) // a quota of 2, with no guess: the key asks
	turn = turn.Add(time.Second)
	// The server turns 300 ms before the key thinks: its refusal of the
	// ask says so.
	serveWindow(t, a, turn, 2, turn.Add(700*time.Millisecond))
	if held, want := a.WindowHeldUntil(), turn.Add(700*time.Millisecond); !held.Equal(want) {
		t.Fatalf("held until %v after the ask's refusal; want %v, when its hint said", held.Sub(t0), want.Sub(t0))
	}
	turn = turn.Add(700 * time.Millisecond)
	serveWindow(t, a, turn, 2, turn.Add(time.Second))
	if held, want := a.WindowHeldUntil(), turn.Add(time.Second+windowMargin); !held.Equal(want) {
		t.Fatalf("held until %v after the window that followed; want %v, a period of 1s after its turn", held.Sub(t0), want.Sub(t0))
	}
}

// pacerOnTheWay runs a key into a window it first took for a bucket: its
// first wave refused at t0 with a hint of a second, its requests at the
// search's pace, each let through, from when the hint ends until, 400 ms
// on, one is refused, then two more, 150 ms apart, sent one after the
// other: windowed. It returns the key, how many went through in the
// window, and when the first refusal of the streak said to come back.
func pacerOnTheWay(t *testing.T, t0 time.Time) (*Pacer, int, time.Time) {
	t.Helper()
	a := New(0, math.Inf(1), t0)
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: time.Second, Flight: -1}, 0, t0)
	now, passed := t0.Add(time.Second), 0
	var seq uint64
	for {
		seq, now = sendAt(t, a, now)
		if now.After(t0.Add(1400 * time.Millisecond)) {
			break
		}
		a.Outcome(seq, succeeded, now)
		passed++
	}
	refused := Answer{Refused: true, Remaining: -1, Hint: time.Second}
	a.Outcome(seq, refused, now)
	streak := now.Add(time.Second)
	for range 2 {
		seq, now = sendAt(t, a, now.Add(150*time.Millisecond))
		a.Outcome(seq, refused, now)
	}
	if a.WindowHeldUntil().IsZero() {
		t.Fatal("three refusals in a row after the requests went through: not windowed")
	}
	return a, passed, streak
}

// TestWindowFoundOnTheWayTurnsWhenTheFirstWaveSaid: a window the key
// found on the way, its requests let through from the turn the first
// wave's hint said until one was refused amid the window, is held to the
// turn that first hint says, a second on, not to the later one the hints
// of its refusals say: that would keep its turns late by most of a
// window for good. A turn so foretold that is refused before anything of
// the window passed was no turn: the key goes back to the later one.
func TestWindowFoundOnTheWayTurnsWhenTheFirstWaveSaid(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, _, streak := pacerOnTheWay(t, t0)
	turn := t0.Add(2 * time.Second)
	if got := a.WindowHeldUntil(); !got.Equal(turn) {
		t.Fatalf("held until %v, want %v, a second after the first wave's hint ended (the streak's hints say %v)",
			got.Sub(t0), turn.Sub(t0), streak.Sub(t0))
	}
	seq, _ := sendAt(t, a, turn)
	a.Outcome(seq, Answer{Refused: true, Remaining: -1, Hint: time.Second}, turn)
	if got := a.WindowHeldUntil(); !got.Equal(streak) {
		t.Fatalf("the foretold turn refused: held until %v, want %v, the turn the streak's first hint said", got.Sub(t0), streak.Sub(t0))
	}
	// The window reopens there, and a second later: its period is that
	// second, not the time since the turn refused, which was no turn.
	// Measured from it, a period of 400 ms would hold every turn after
	// from the wrong instant.
	for range 10 {
		seq, _ := sendAt(t, a, streak)
		a.Outcome(seq, succeeded, streak)
	}
	seq, _ = sendAt(t, a, streak)
	closed := streak.Add(5 * time.Millisecond)
	a.Outcome(seq, Answer{Refused: true, Remaining: -1, Hint: time.Second}, closed)
	second := a.WindowHeldUntil()
	if !second.After(closed) {
		t.Fatalf("the window refused at %v: held until %v, want a second on", closed.Sub(t0), second.Sub(t0))
	}
	sendAt(t, a, second)
	if p := a.win.period; p < 900*time.Millisecond {
		t.Errorf("reopened at %v, a second after %v: period %v, want about a second", second.Sub(t0), streak.Sub(t0), p)
	}
}

// TestWindowFoundOnTheWaySendsWhatTheLastGaveThenAsks: the first window
// that reopens after the key found it on the way sends what the last
// window let through, then one more alone, whose answer says whether the
// window gives more, rather than every request waiting at once, all but
// the quota refused with it.
func TestWindowFoundOnTheWaySendsWhatTheLastGaveThenAsks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, passed, _ := pacerOnTheWay(t, t0)
	turn := a.WindowHeldUntil()
	first, _ := sendAt(t, a, turn) // asks alone whether the window turned
	a.Outcome(first, succeeded, turn)
	var seqs []uint64
	for range 2 * passed { // bounded: a window with no guess sends all it is given
		seq, _, _, went := a.Take(turn)
		if !went {
			break
		}
		seqs = append(seqs, seq)
	}
	if len(seqs) != passed-1 {
		t.Fatalf("sent %d at once once the window turned, want the %d the last window gave, less the one that asked", len(seqs), passed-1)
	}
	for _, seq := range seqs {
		a.Outcome(seq, succeeded, turn)
	}
	if _, _, _, went := a.Take(turn); !went {
		t.Fatal("the quota answered: no request goes to ask for more")
	}
	if _, _, ready, went := a.Take(turn); went || ready == nil {
		t.Errorf("a request beside the one that asks: went %v, want it held for that one's answer", went)
	}
}

// TestEarlierTurn pins the turn an earlier hint says, a step at a time:
// the next one after now, when it comes before the turn the later hints
// say, and none from an anchor more than windowAnchorSteps steps back.
func TestEarlierTurn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name              string
		anchor, opens, at time.Time
		step              time.Duration
		want              time.Time
	}{
		{"a step after the anchor", at(1003), at(2404), at(1450), time.Second, at(2003)},
		{"the anchor itself, still ahead", at(1003), at(1043), at(40), time.Second, at(1003)},
		{"three steps on", at(1003), at(4404), at(3450), time.Second, at(4003)},
		{"now on an anchor's step: the next one", at(1003), at(3404), at(2003), time.Second, at(3003)},
		{"not before the later turn", at(1003), at(2003), at(1450), time.Second, time.Time{}},
		{"an anchor too far back", at(1003), at(7404), at(6450), time.Second, time.Time{}},
		{"no anchor", time.Time{}, at(2404), at(1450), time.Second, time.Time{}},
		{"no step", at(1003), at(2404), at(1450), 0, time.Time{}},
	} {
		if got := earlierTurn(c.anchor, c.step, c.opens, c.at); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got.Sub(t0), c.want.Sub(t0))
		}
	}
}
