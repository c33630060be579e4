package learn

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPacerTakesAnyOrderOfAnswers drives Pacers through seeded random
// orders of sends and answers (successes, refusals with and without
// hints, counts, errors, answered in any order, and some late): none
// panics, and every Take either sends or says what to wait for.
func TestPacerTakesAnyOrderOfAnswers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		a := New(0, math.Inf(1), t0)
		a.Adopt(slowStart(0, map[int]int{0: rng.IntN(3), rng.IntN(20): rng.IntN(60)}))
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
