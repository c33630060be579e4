package learn

import (
	"math"
	"testing"
	"time"
)

// TestTrialTellsAShedderWithoutSlowing: the key's first request is
// refused, with nothing let through before it and no hint. The requests
// sent at once after it are let through, one in three, as a shedder's
// are: the key goes blind to its refusals without having been paced. A
// bucket that others emptied refuses every request sent at once after
// the first refusal: the search for a pace starts, as it would have at
// the first refusal.
func TestTrialTellsAShedderWithoutSlowing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := Answer{Refused: true, Remaining: -1, Flight: 0}
	ok := Answer{OK: true, Remaining: -1, Flight: 0}

	shed := New(0, math.Inf(1), t0)
	shed.Untracked(refused, 0, t0)
	for i := range 6 {
		if r := shed.rate(t0); !math.IsInf(r, 1) {
			t.Fatalf("shedder, answer %d: paced at %.2f/s during the trial, want unpaced", i, r)
		}
		an := refused
		if i%3 == 2 {
			an = ok
		}
		shed.Untracked(an, int64(i+1), t0)
	}
	if !shed.blind(t0) || !math.IsInf(shed.rate(t0), 1) {
		t.Errorf("shedder: blind %v, rate %.2f/s; want blind and unpaced", shed.blind(t0), shed.rate(t0))
	}

	emptied := New(0, math.Inf(1), t0)
	emptied.Untracked(refused, 0, t0)
	for i := range trialDry {
		emptied.Untracked(refused, int64(i+1), t0)
	}
	if emptied.blind(t0) || math.IsInf(emptied.rate(t0), 1) {
		t.Errorf("emptied bucket: blind %v, rate %.2f/s; want paced", emptied.blind(t0), emptied.rate(t0))
	}

	// A shedder may let a few through before its first refusal (one
	// that refuses 2 in 3 lets the first 3 through once in 27 runs):
	// fewer than a rate's burst is still tried first.
	const luck = 3
	lucky := New(0, math.Inf(1), t0)
	for i := range luck {
		lucky.Untracked(ok, int64(i+1), t0)
	}
	lucky.Untracked(refused, luck+1, t0)
	if !lucky.shed.On() {
		t.Fatalf("a refusal after %d let through started no trial", luck)
	}
	for i := range 6 {
		an := refused
		if i%3 == 2 {
			an = ok
		}
		lucky.Untracked(an, int64(luck+i+2), t0)
	}
	if !lucky.blind(t0) || !math.IsInf(lucky.rate(t0), 1) {
		t.Errorf("shedder that let %d through first: blind %v, rate %.2f/s; want blind and unpaced",
			luck, lucky.blind(t0), lucky.rate(t0))
	}

	// A burst let through first is a rate's: no trial, paced at once.
	fresh := New(0, math.Inf(1), t0)
	fresh.Adopt(slowStart(0, map[int]int{0: 1, 1: 2, 3: 4, 9: 3}))
	fresh.Untracked(refused, 10, t0)
	if fresh.shed.On() || math.IsInf(fresh.rate(t0), 1) {
		t.Errorf("fresh bucket: on trial %v, rate %.2f/s; want paced at once", fresh.shed.On(), fresh.rate(t0))
	}

	// Successes that come after the trial's span may be a refill's.
	late := New(0, math.Inf(1), t0)
	late.Untracked(refused, 0, t0)
	if !late.shed.On() {
		t.Fatal("a refusal before anything went through started no trial")
	}
	later := t0.Add(2 * TrialSpan)
	late.Untracked(ok, 1, later)
	late.Untracked(ok, 2, later)
	if late.blind(later) || late.shed.On() || math.IsInf(late.rate(later), 1) {
		t.Errorf("successes after the trial's span: blind %v, on trial %v, rate %.2f/s; want the trial ended as a rate's, paced",
			late.blind(later), late.shed.On(), late.rate(later))
	}
}
