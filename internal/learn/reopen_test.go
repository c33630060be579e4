package learn

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// reopenedKey is a key whose first 50 requests, unpaced, passed, and
// whose next was refused at t0 with a hint of a second.
func reopenedKey(t0 time.Time) *Pacer {
	a := New(0, math.Inf(1), t0)
	a.Adopt(50, 0, 19)
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: time.Second, Flight: -1}, 0, t0)
	return a
}

// sendReopening sends, at now, as many requests as the key lets go
// without waiting for a delay, answering each wave ok before the next
// as a slow start does: it returns how many went and the waves they took.
func sendReopening(t *testing.T, a *Pacer, now time.Time, ok func(i int) bool) (sent, waves int) {
	t.Helper()
	for waves = 0; waves < 100; waves++ {
		var wave []uint64
		for {
			seq, delay, ready, went := a.Take(now)
			if !went {
				if ready == nil && delay <= 0 {
					t.Fatalf("Take at %v neither sent nor said how long to wait", now)
				}
				break
			}
			wave = append(wave, seq)
		}
		if len(wave) == 0 {
			return sent, waves
		}
		for _, seq := range wave {
			an := succeeded
			if !ok(sent) {
				an = refused
			}
			a.Outcome(seq, an, now)
			sent++
		}
	}
	t.Fatal("the reopening never ended")
	return sent, waves
}

// TestReopeningSendsWhatPassedAtOnce: when the first refusal's hint ends,
// the 50 requests the server let through before it go at once, in a slow
// start of a few round trips rather than at the searched pace, which
// would take most of a second over them.
func TestReopeningSendsWhatPassedAtOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := reopenedKey(t0)
	opens := t0.Add(time.Second)
	sent, waves := sendReopening(t, a, opens, func(int) bool { return true })
	if sent != 50 || waves > 7 {
		t.Fatalf("the reopening sent %d requests in %d round trips; want 50 in at most 7", sent, waves)
	}
	if seq, delay, _, went := a.Take(opens); went || delay <= 0 {
		t.Fatalf("request 51 went at once (seq %d, delay %v); want it paced", seq, delay)
	}
}

// TestReopeningTellsAWindow: a request sent two intervals of the rate
// the reopening showed after it, and refused, shows a server that
// refills nothing between its turns: the key is held until the hint of
// that refusal says, as a window's.
func TestReopeningTellsAWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := reopenedKey(t0)
	opens := t0.Add(time.Second)
	sendReopening(t, a, opens, func(int) bool { return true })
	seq, at := sendAt(t, a, opens)
	// The reopening let 50 through a second after the bucket, if one,
	// was empty: 50 a second, a token every 20 ms; two of them on.
	if min := opens.Add(40 * time.Millisecond); at.Before(min) {
		t.Fatalf("the request after the reopening went at %v; want it no sooner than %v", at.Sub(t0), min.Sub(t0))
	}
	a.Outcome(seq, Answer{Refused: true, Remaining: -1, Hint: time.Second}, at)
	if got, want := a.WindowHeldUntil(), at.Add(time.Second); !got.Equal(want) {
		t.Fatalf("held until %v; want the window's turn the hint says, %v", got.Sub(t0), want.Sub(t0))
	}
}

// TestReopeningCountsStragglers: requests sent before the first refusal
// and let through after it count in the reopening: it sends as many.
func TestReopeningCountsStragglers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	a.Adopt(50, 3, 19)
	a.Untracked(Answer{Refused: true, Remaining: -1, Hint: time.Second, Flight: -1}, 0, t0)
	for range 3 {
		a.Unpaced(true, 19)
	}
	if sent, _ := sendReopening(t, a, t0.Add(time.Second), func(int) bool { return true }); sent != 53 {
		t.Fatalf("the reopening sent %d; want the 53 let through before and after the first refusal", sent)
	}
}

// TestReopeningOfABucket: a bucket that refilled less than the reopening
// refuses one of it: the reopening ends there (the successes of its wave
// answered after the refusal change nothing), and the key is paced, not
// windowed; and one that refilled what it gave lets the test request
// through: no window either.
func TestReopeningOfABucket(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := reopenedKey(t0)
	opens := t0.Add(time.Second)
	sent, _ := sendReopening(t, a, opens, func(i int) bool { return i != 5 })
	if sent >= 50 {
		t.Fatalf("the reopening sent all %d requests though the 6th was refused; want it ended at its wave", sent)
	}
	if _, delay, _, went := a.Take(opens); went || delay <= 0 {
		t.Fatalf("a request after the reopening's refusal went at once; want it paced")
	}
	if !a.WindowHeldUntil().IsZero() {
		t.Fatal("a refusal within the reopening made the key windowed")
	}

	b := reopenedKey(t0)
	sendReopening(t, b, opens, func(int) bool { return true })
	seq, at := sendAt(t, b, opens)
	b.Outcome(seq, succeeded, at)
	seq, at = sendAt(t, b, at)
	b.Outcome(seq, Answer{Refused: true, Remaining: -1, Hint: time.Second}, at)
	if !b.WindowHeldUntil().IsZero() {
		t.Fatal("a refusal after the test request passed made the key windowed; want the bucket paced")
	}
}

// TestPacerTakesAnyOrderOfAnswers drives Pacers through seeded random
// orders of sends and answers (successes, refusals with and without
// hints, counts, errors, answered in any order, and some late): none
// panics, and every Take either sends or says what to wait for. The
// reopening's answers racing its refusal once divided by zero.
func TestPacerTakesAnyOrderOfAnswers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := New(0, math.Inf(1), t0)
		a.Adopt(rng.IntN(60), 0, rng.IntN(20))
		now := t0
		var out []uint64
		for step := 0; step < 400; step++ {
			now = now.Add(time.Duration(rng.IntN(30)) * time.Millisecond)
			switch rng.IntN(4) {
			case 0, 1:
				seq, delay, ready, sent := a.Take(now)
				switch {
				case sent:
					out = append(out, seq)
				case delay <= 0 && ready == nil:
					t.Fatalf("seed %d step %d: Take neither sent nor said what to wait for", seed, step)
				}
			case 2:
				if len(out) == 0 {
					a.Untracked(Answer{Refused: true, Remaining: -1, Hint: time.Duration(rng.IntN(3)) * time.Second, Flight: -1}, 0, now)
					continue
				}
				i := rng.IntN(len(out))
				seq := out[i]
				out = append(out[:i], out[i+1:]...)
				an := Answer{Remaining: -1, Flight: -1}
				switch rng.IntN(6) {
				case 0, 1, 2:
					an.OK = true
				case 3:
					an.Refused = true
				case 4:
					an.Refused, an.Hint = true, time.Duration(1+rng.IntN(2000))*time.Millisecond
				case 5:
					an.OK, an.Remaining, an.Limit, an.Reset = true, rng.IntN(5), 50, time.Second
				}
				a.Outcome(seq, an, now)
			case 3:
				if len(out) > 0 && rng.IntN(8) == 0 {
					out = out[1:]
					a.Cancel()
				}
			}
		}
	}
}
