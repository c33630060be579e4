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
// unpaced, its refusals left to the retries: within a minute of requests
// sent one at a time, in each of 200 draws (a test that compared six
// early answers with six late ones took over a minute in 4 draws of 200,
// over 4 hours in one: a run of refusals among the first six, or a lucky
// run among the last, looked like a bucket's); and refusals no longer
// slow it while it is.
func TestBlindRefusalsGiveThePaceBack(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(200) {
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
		if took := now.Sub(t0); !a.blind(now) || took > time.Minute {
			t.Errorf("seed %d: still paced after %v", seed, took.Round(time.Second))
			continue
		}
		if r := a.rate(now); !math.IsInf(r, 1) {
			t.Errorf("seed %d: blind, yet paced at %.2f/s", seed, r)
		}
		a.Outcome(0, refused, now)
		if r := a.rate(now); !math.IsInf(r, 1) {
			t.Errorf("seed %d: a refusal while blind paced the key at %.2f/s", seed, r)
		}
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
// within a minute in 9 draws of 10, within 15 minutes in every one of
// 200 (comparing six early answers with six late ones: within a minute in
// 128 draws of 200, still paced after 15 minutes in 24); and in half of
// them, its pace never
// below 0.3/s before, the search below the told limit holding at its
// floor, then halving it, until the test can tell (cut at each refusal
// instead, the pace fell below 0.15/s in half the draws).
// A bucket of 0.5/s, 2/s, 10/s or 30/s under the same told limit is
// found: its refusals fall with the pace.
func TestToldSearchTellsBlindRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const told = 40.0
	const draws = 200
	soon, held := 0, 0
	for seed := range uint64(draws) {
		shed := shedderOf(seed, 2)
		a := New(0, math.Inf(1), t0)
		a.SetTold(told)
		a.Untracked(refused, 0, t0) // the refusal that armed the key
		now, slowest := t0, told
		for now.Sub(t0) <= 15*time.Minute {
			if now = runPaced(t, a, now, 1, shed); a.blind(now) {
				break
			}
			slowest = math.Min(slowest, a.rate(now))
		}
		switch took := now.Sub(t0); {
		case !a.blind(now):
			t.Errorf("seed %d: still paced after %v", seed, took.Round(time.Second))
		case took <= time.Minute:
			soon++
		}
		if slowest >= 0.3 {
			held++
		}
	}
	if soon < draws*9/10 || held < draws/2 {
		t.Errorf("unpaced within a minute in %d draws of %d, and never paced below 0.3/s before in %d; want %d and %d at least",
			soon, draws, held, draws*9/10, draws/2)
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

// samplesOf notes n answers at pace, ok of them let through, spread
// evenly, the last one refused unless all were let through.
func samplesOf(s *Samples, pace float64, n, ok int) {
	for i := range n {
		s.Note(pace, (i+1)*ok/n > i*ok/n)
	}
}

// TestSamplesWeighBothReadings: the blind test takes the reading that
// explains the answers: a share let through at any pace is blind, a rate
// is rated; it waits when the pace has not varied (and the search's
// floor gives way), when the last answers were all refused (a window
// that ran out), and when most were let through (a key that shares its
// server with clients that take what it leaves).
func TestSamplesWeighBothReadings(t *testing.T) {
	for _, c := range []struct {
		name    string
		fill    func(s *Samples)
		floored bool
		want    Verdict
	}{
		{"a third let through at 20/s and at 2/s", func(s *Samples) {
			samplesOf(s, 20, 12, 4)
			samplesOf(s, 2, 24, 8)
		}, false, VerdictBlind},
		{"a bucket of 2/s: a tenth at 20/s, all at 1.5/s", func(s *Samples) {
			samplesOf(s, 20, 12, 1)
			samplesOf(s, 1.5, 12, 12)
		}, true, VerdictRated},
		{"a third at 5/s only", func(s *Samples) { samplesOf(s, 5, 36, 12) }, false, NoVerdict},
		{"a third at 5/s only, floored", func(s *Samples) { samplesOf(s, 5, 36, 12) }, true, VerdictUndecided},
		{"a third at 20/s and at 2/s, the last six refused", func(s *Samples) {
			samplesOf(s, 20, 12, 4)
			samplesOf(s, 2, 24, 8)
			samplesOf(s, 2, 6, 0)
		}, false, NoVerdict},
		{"two thirds at 20/s and at 2/s", func(s *Samples) {
			samplesOf(s, 20, 12, 8)
			samplesOf(s, 2, 24, 16)
		}, false, NoVerdict},
		{"too few", func(s *Samples) {
			samplesOf(s, 20, 6, 2)
			samplesOf(s, 2, 5, 2)
		}, true, NoVerdict},
	} {
		var s Samples
		c.fill(&s)
		if got := s.Verdict(c.floored, nil); got != c.want {
			t.Errorf("%s: verdict %d, want %d", c.name, got, c.want)
		}
	}
}

// BenchmarkBlindVerdict is the test a refusal of a paced key runs: 96
// answers over 24 paces.
func BenchmarkBlindVerdict(b *testing.B) {
	var s Samples
	for i := range 96 {
		s.Note(40*math.Exp2(-float64(i/4)/4), i%3 == 0)
	}
	for b.Loop() {
		s.Verdict(false, nil)
	}
}
