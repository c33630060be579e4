package learn

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// runPaced sends n requests one after the other through a, each at its
// place in the pace, answered at once by answer, and returns when the
// last went.
func runPaced(t *testing.T, a *Pacer, now time.Time, n int, answer func(at time.Time) Answer) time.Time {
	t.Helper()
	for range n {
		var seq uint64
		seq, now = sendAt(t, a, now)
		a.Outcome(seq, answer(now), now)
	}
	return now
}

// TestBlindRefusalsGiveThePaceBack: a server that refuses two requests in
// three, however slowly they come, makes a key that learned a pace go
// unpaced, its refusals left to the retries: within 10 minutes of
// requests sent one at a time in 15 draws of 20 (the test must say so
// twice, and a run of refusals looks like a bucket's, or like clients
// sharing the server, until successes come back); and refusals no longer
// slow it while it is.
func TestBlindRefusalsGiveThePaceBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	quick := 0
	for seed := range uint64(20) {
		shed := shedderOf(seed, 1)
		a := New(0, math.Inf(1), t0)
		a.Untracked(refused, 0, t0) // the refusal that armed the key
		now := t0
		for range 300 {
			now = runPaced(t, a, now, 1, shed)
			if a.blind(now) {
				break
			}
		}
		if !a.blind(now) || now.Sub(t0) > 10*time.Minute {
			continue
		}
		quick++
		if r := a.rate(now); !math.IsInf(r, 1) {
			t.Errorf("seed %d: blind, yet paced at %.2f/s", seed, r)
		}
		a.Outcome(0, refused, now)
		if r := a.rate(now); !math.IsInf(r, 1) {
			t.Errorf("seed %d: a refusal while blind paced the key at %.2f/s", seed, r)
		}
	}
	if quick < 15 {
		t.Errorf("unpaced within 10 minutes in %d draws of 20, want 15 at least", quick)
	}
}

// shedderOf answers as a server shedding load does: two requests in three
// refused, however slowly they come, drawn from the seeds.
func shedderOf(seed, stream uint64) func(time.Time) Answer {
	r := rand.New(rand.NewPCG(seed, stream))
	return func(time.Time) Answer {
		if r.Float64() < 2.0/3 {
			return refused
		}
		return succeeded
	}
}

// bucketOf answers as a token bucket of rate a second and 10 at once,
// empty at t0, does.
func bucketOf(rate float64, t0 time.Time) func(at time.Time) Answer {
	tokens, last := 0.0, t0
	return func(at time.Time) Answer {
		tokens = math.Min(tokens+rate*at.Sub(last).Seconds(), 10)
		last = at
		if tokens >= 1 {
			tokens--
			return succeeded
		}
		return refused
	}
}

// TestBucketRefusalsAreNotBlind: a token bucket's refusals fall as the
// pace falls: searched from high above its rate, or from just above, a
// key never goes blind to them, and ends up paced near the bucket's rate.
func TestBucketRefusalsAreNotBlind(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rate := range []float64{0.5, 2, 20, 50, 200} {
		bucket := bucketOf(rate, t0)
		a := New(0, math.Inf(1), t0)
		a.Untracked(refused, 0, t0)
		now := runPaced(t, a, t0, int(math.Max(rate*60, 60)), bucket)
		if a.blind(now) || a.blindHold.Held() {
			t.Errorf("bucket of %g/s: went blind to its refusals", rate)
		}
		if got := a.rate(now); got < rate*0.7 || got > rate*1.3 {
			t.Errorf("bucket of %g/s: paced at %.2f/s after %v", rate, got, now.Sub(t0))
		}
	}
}

// TestToldSearchTellsBlindRefusals: under a told limit of 40/s, a server
// that refuses two requests in three however slowly they come (a host
// that sheds load) leaves the key unpaced, as it does with no told limit:
// within 10 minutes in 15 draws of 20 at least; and in half of them, its
// pace never below 0.3/s before, the search below the told limit holding
// at its floor, then halving it, until the test can tell (cut at each
// refusal instead, the pace fell below 0.15/s in half the draws).
// A bucket of 0.5/s, 2/s, 10/s or 30/s under the same told limit is
// found: its refusals fall with the pace.
func TestToldSearchTellsBlindRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const told = 40.0
	soon, held := 0, 0
	for seed := range uint64(20) {
		shed := shedderOf(seed, 2)
		a := New(0, math.Inf(1), t0)
		a.SetTold(told)
		a.Untracked(refused, 0, t0) // the refusal that armed the key
		now, slowest := t0, told
		for range 300 {
			if now = runPaced(t, a, now, 1, shed); a.blind(now) {
				break
			}
			slowest = math.Min(slowest, a.rate(now))
		}
		if a.blind(now) && now.Sub(t0) <= 10*time.Minute {
			soon++
		}
		if slowest >= 0.3 {
			held++
		}
	}
	if soon < 15 || held < 10 {
		t.Errorf("unpaced within 10 minutes in %d draws of 20, and never paced below 0.3/s before in %d; want 15 and 10 at least",
			soon, held)
	}

	var now time.Time
	for _, rate := range []float64{0.5, 2, 10, 30} {
		bucket := bucketOf(rate, t0)
		b := New(0, math.Inf(1), t0)
		b.SetTold(told)
		b.Untracked(refused, 0, t0)
		now = runPaced(t, b, t0, int(math.Max(rate*60, 120)), bucket)
		if got := b.rate(now); got < rate*0.7 || got > rate*1.3 || b.blind(now) {
			t.Errorf("a bucket of %g/s under a told 40/s: paced at %.2f/s (blind %v) after %v", rate,
				got, b.blind(now), now.Sub(t0).Round(time.Second))
		}
	}
}
