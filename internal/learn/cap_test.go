package learn

import (
	"math"
	"testing"
	"time"
)

func TestFlightsCapAt(t *testing.T) {
	tests := []struct {
		name    string
		ok, ref map[int]int32
		want    int
	}{
		{"refused only with 5 or more in flight", map[int]int32{0: 3, 2: 2, 4: 1}, map[int]int32{5: 2, 6: 1}, 5},
		{"a refusal with none in flight: a rate's", map[int]int32{1: 4, 3: 2}, map[int]int32{0: 1, 5: 2}, 0},
		{"let through as often with as many in flight: a rate's", map[int]int32{0: 2, 5: 3, 6: 2}, map[int]int32{5: 2}, 0},
		{"too few let through below", map[int]int32{0: 1}, map[int]int32{3: 2}, 0},
		{"nothing refused", map[int]int32{0: 9, 5: 9}, nil, 0},
	}
	for _, tt := range tests {
		var f flights
		for k, n := range tt.ok {
			f.ok[k] = n
		}
		for k, n := range tt.ref {
			f.refused[k] = n
		}
		if got := f.capAt(2); got != tt.want {
			t.Errorf("%s: capAt(2) = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestLongHintsAreNoCap: a key's slow start let through with one other in
// flight, then refused twice with two, each refusal asking for a whole
// window of 10s (a sliding window run out as the slow start opened up):
// that is no cap of two in flight, which a refusal with no hint would be.
func TestLongHintsAreNoCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		hint time.Duration
		want int
	}{{10 * time.Second, 0}, {0, 2}} {
		a := New(0, math.Inf(1), t0)
		ok := Answer{OK: true, Remaining: -1, Flight: 1}
		no := Answer{Refused: true, Remaining: -1, Flight: 2, Hint: tc.hint}
		a.Untracked(ok, 0, t0)
		a.Untracked(ok, 0, t0)
		a.Untracked(no, 0, t0)
		a.Untracked(no, 0, t0)
		a.Outcome(a.sent, Answer{Refused: true, Remaining: -1, Hint: tc.hint}, t0)
		if a.flightCap != tc.want {
			t.Errorf("refusals with a hint of %v: capped at %d in flight, want %d", tc.hint, a.flightCap, tc.want)
		}
	}
}

// slowStart is a key's slow start that let through, for each count of
// others in flight, that many, and has out in flight.
func slowStart(out int, okWith map[int]int) *Start {
	s := &Start{out: out, okWith: new([capFlights]uint8)}
	for k, n := range okWith {
		if k > 0 {
			s.okWith[k] = uint8(n)
		}
		s.open += n
	}
	s.open++
	return s
}

// TestFirstWindowIsNoCap: a fixed window of 50 a second, 20 workers. The
// key's slow start let 50 through, 31 of them with 19 others in flight,
// then the window ran out and the 20 in flight were refused at once, as
// many others in flight as those let through had. The next window let 50
// through with fewer in flight and refused one with 1 other. That is a
// window's way, not a cap of 19 in flight: as many went through with 19
// others as were refused with them.
func TestFirstWindowIsNoCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	a.Adopt(slowStart(20, map[int]int{0: 1, 1: 2, 3: 4, 7: 8, 15: 4, 19: 31}))
	refused := Answer{Refused: true, Remaining: -1, Flight: 19, Hint: time.Second}
	for range 20 {
		a.Untracked(refused, 0, t0)
		a.Unpaced(false, 19)
	}
	next := t0.Add(time.Second)
	for i := range 50 {
		a.Untracked(Answer{OK: true, Remaining: -1, Flight: i % 2}, 0, next)
	}
	a.Untracked(Answer{Refused: true, Remaining: -1, Flight: 1, Hint: 600 * time.Millisecond}, 0, next)
	if a.flightCap != 0 {
		t.Errorf("capped at %d in flight; want no cap: as many of the first window went through with 19 others as were refused", a.flightCap)
	}
}

// capped returns a Pacer that learned a cap of 5 from a slow start: let
// through twice with 3 others in flight, refused with 5 and 6.
func capped(t *testing.T, t0 time.Time) *Pacer {
	t.Helper()
	return waveCapped(t, t0, 3, 3)
}

// waveCapped returns a Pacer whose slow start let requests through with
// okWith others in flight, then refused them with 5 and 6: a cap of 5.
func waveCapped(t *testing.T, t0 time.Time, okWith ...int) *Pacer {
	t.Helper()
	a := New(0, math.Inf(1), t0)
	for _, k := range okWith {
		a.Untracked(Answer{OK: true, Remaining: -1, Flight: k}, 0, t0)
	}
	for _, k := range []int{5, 6} {
		a.Untracked(Answer{Refused: true, Remaining: -1, Flight: k}, 0, t0)
	}
	if a.flightCap != 5 {
		t.Fatalf("capped at %d in flight, want 5", a.flightCap)
	}
	return a
}

// TestStrayRefusalKeepsTheCap pins the race of a request sent in the
// instant another's answer came, before the server let that one go: it is
// refused with fewer others in flight, by the key's count, than the cap.
// In a slow start, one such refusal among those of the cap does not hide
// the cap; once the cap is learned, one neither lowers it nor, sent with
// none in flight, ends it. The next soon after does: the server holds
// fewer now.
func TestStrayRefusalKeepsTheCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := Answer{Refused: true, Remaining: -1}

	a := New(0, math.Inf(1), t0)
	for _, an := range []Answer{
		{OK: true, Remaining: -1, Flight: 3}, {OK: true, Remaining: -1, Flight: 3},
		{Refused: true, Remaining: -1, Flight: 3}, // the stray
		{Refused: true, Remaining: -1, Flight: 6}, {Refused: true, Remaining: -1, Flight: 5},
	} {
		a.Untracked(an, 0, t0)
	}
	if a.flightCap != 5 {
		t.Errorf("a stray refusal with 3 others in flight among the slow start's: capped at %d, want 5", a.flightCap)
	}

	for _, stray := range []int{4, 0} {
		a := capped(t, t0)
		var seqs []uint64
		for range 5 {
			seq, _, _, sent := a.Take(t0)
			if !sent {
				t.Fatalf("the cap of 5 held the request of %d in flight", len(seqs))
			}
			seqs = append(seqs, seq)
		}
		for _, seq := range seqs[:5-stray] {
			a.Outcome(seq, Answer{OK: true, Remaining: -1}, t0)
		}
		// Sent with stray others in flight, as the others' answers came.
		seq, _, _, _ := a.Take(t0)
		a.Outcome(seq, refused, t0)
		if a.flightCap != 5 || a.unpaced != true {
			t.Errorf("a stray refusal with %d others in flight: capped at %d (unpaced %v), want 5, unpaced", stray, a.flightCap, a.unpaced)
		}
		seq, _, _, _ = a.Take(t0)
		wasCapped := a.Outcome(seq, refused, t0)
		if stray == 4 && a.flightCap != 4 || stray == 0 && a.flightCap != 0 {
			t.Errorf("a second refusal with %d others in flight: capped at %d, want %d", stray, a.flightCap, min(stray, 4))
		}
		if wasCapped {
			t.Errorf("a second refusal with %d others in flight reported capped: it lowers or ends the cap, and is no probe's", stray)
		}
	}
}

// TestSlowStartStrayIsNoLowerCap pins a slow start's round that lets
// eight requests go in one instant, against a cap of 5: the one sent with
// 4 others in flight by the key's count reached the server after a later
// one, still in flight when it was refused. Taken as refused with 4, it
// and a refusal with 6 show a cap of 4, which holds the key below the
// server's 5 (1.27 of the least time) until a probe; taken as refused
// with the others in flight at its answer, the cap is 5 or more, and a
// cap one too high costs a refusal.
func TestSlowStartStrayIsNoLowerCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	// Armed by the stray: 3 let through, the most with 3 others in
	// flight; 8 of the round out, the stray among them.
	a.Adopt(slowStart(8, map[int]int{0: 1, 1: 1, 3: 1}))
	a.Untracked(Answer{Refused: true, Remaining: -1, Flight: 4}, 0, t0)
	a.Unpaced(false, 4)
	a.Untracked(Answer{Refused: true, Remaining: -1, Flight: 6}, 0, t0)
	a.Unpaced(false, 6)
	if a.flightCap < 5 {
		t.Errorf("capped at %d in flight, want 5 or more: the stray with 4 others counted is a cap one too low", a.flightCap)
	}
}

// TestProbeRefusedOutOfOrderIsTheProbes pins the race of a probe: the
// answer that raises the cap of 5 to 6 frees one place, and the head sends
// two requests in one instant, one with 4 others in flight and the probe
// with 5. The server has room for one of them, and which of the two
// reaches it first is chance: when the one sent with 4 others is refused,
// the probe's extra request is what the server refused, and the cap goes
// back to 5, not down to 4.
func TestProbeRefusedOutOfOrderIsTheProbes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, first := range []bool{true, false} { // the one with 4 others refused, or the probe
		a := capped(t, t0)
		var out []uint64
		take := func() uint64 {
			t.Helper()
			seq, _, _, sent := a.Take(t0)
			if !sent {
				t.Fatalf("the cap of %d held a request with %d in flight", a.flightCap, len(out))
			}
			out = append(out, seq)
			return seq
		}
		for range 5 {
			take()
		}
		// The cap full, one answered and one sent at a time, until a
		// success raises the cap: a probe.
		for i := 0; !a.capProbing; i++ {
			if i > 1000 {
				t.Fatal("no probe after 1000 successes with the cap full")
			}
			a.Outcome(out[0], succeeded, t0)
			out = out[1:]
			if a.capProbing {
				break
			}
			take()
		}
		if a.flightCap != 6 {
			t.Fatalf("probing a cap of %d, want 6", a.flightCap)
		}
		grow := a.capGrow
		with4, with5 := take(), take()
		if _, _, _, sent := a.Take(t0); sent {
			t.Fatal("a seventh request went under a probe of 6")
		}
		refusedSeq, passedSeq := with4, with5
		if !first {
			refusedSeq, passedSeq = with5, with4
		}
		if capped := a.Outcome(refusedSeq, refused, t0); !capped {
			t.Error("the probe's refusal was not reported capped: its retry would back off, not wait in line for room")
		}
		if a.flightCap != 5 || a.capProbing || a.capGrow != 2*grow {
			t.Errorf("the probe's race, refused the request sent with %d others: capped at %d (probing %v, next probe after %d), want 5, not probing, after %d",
				map[bool]int{true: 4, false: 5}[first], a.flightCap, a.capProbing, a.capGrow, 2*grow)
		}
		a.Outcome(passedSeq, succeeded, t0)
	}
}

// firstWaveCap returns a Pacer whose first wave of requests showed a cap
// of 5 in flight: let through four times with 2 and 3 others in flight
// (a rate's burst: no shedder's trial), refused with 5 and 6. The first
// refusal started the search for a pace, so the cap is in doubt: a
// bucket's burst run out refuses a wave alike.
func firstWaveCap(t *testing.T, t0 time.Time) *Pacer {
	t.Helper()
	a := waveCapped(t, t0, 2, 2, 3, 3)
	if !a.capDoubted || a.unpaced {
		t.Fatalf("in doubt %v, unpaced %v; want in doubt, the search's pace kept", a.capDoubted, a.unpaced)
	}
	return a
}

// TestFirstRefusalAloneShowsADoubtedCap: a slow start whose round
// passes a cap of 5 by one is refused once, with 5 others in flight, all
// of those sent with fewer let through. The search for a pace that
// refusal starts keeps the cap in doubt beside it at once, tellers due,
// rather than waiting for a second refusal the search's pace brings
// hundreds of milliseconds later; refused with none in flight, no cap.
func TestFirstRefusalAloneShowsADoubtedCap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		refusedWith int
		want        int
	}{{5, 5}, {0, 0}} {
		a := New(0, math.Inf(1), t0)
		for _, k := range []int{0, 0, 1, 1, 2, 3} {
			a.Untracked(Answer{OK: true, Remaining: -1, Flight: k}, 0, t0)
		}
		a.Untracked(Answer{Refused: true, Remaining: -1, Flight: c.refusedWith}, 0, t0)
		if !a.probing {
			t.Fatalf("refused with %d others: the search for a pace did not start", c.refusedWith)
		}
		if a.flightCap != c.want || a.capDoubted != (c.want > 0) || a.tellerDue() != (c.want > 0) {
			t.Errorf("refused once with %d others in flight: capped at %d (in doubt %v, tellers due %v); want %d, in doubt and tellers due %v",
				c.refusedWith, a.flightCap, a.capDoubted, a.tellerDue(), c.want, c.want > 0)
		}
	}
}

// TestFirstWaveCapIsDoubted pins how a cap the first refusals showed is
// told from a bucket's burst: two requests go at once, the tellers, and
// the others wait for the search's pace. A cap lets both through, and
// the pace goes: the cap alone holds the key. An empty bucket refuses a
// teller sent with fewer others in flight than the cap: the cap ends,
// the pace stands where it was (the teller went outside it), and the
// wave's other refusals, answered later, show no cap again.
func TestFirstWaveCapIsDoubted(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tellers := func(a *Pacer) [2]uint64 {
		t.Helper()
		var seqs [2]uint64
		for i := range seqs {
			seq, delay, _, sent := a.Take(t0)
			if !sent {
				t.Fatalf("teller %d held for %v: the tellers go at once", i+1, delay)
			}
			seqs[i] = seq
		}
		if _, delay, _, sent := a.Take(t0); sent || delay <= 0 || delay > interval(a.rate(t0)) {
			t.Fatalf("a third request held for %v (sent %v); want held, at most an interval of the pace (%v): only the tellers go outside it, and take no place in it",
				delay, sent, interval(a.rate(t0)))
		}
		return seqs
	}

	// sendPaced sends n requests at a's pace from now on, returning when
	// the last went.
	sendPaced := func(t *testing.T, a *Pacer, now time.Time, n int) time.Time {
		t.Helper()
		for i := range n {
			seq, delay, _, sent := a.Take(now)
			if !sent {
				now = now.Add(delay)
				seq, delay, _, sent = a.Take(now)
			}
			if !sent || seq == 0 {
				t.Fatalf("paced request %d held for %v", i+1, delay)
			}
		}
		return now
	}

	t.Run("a cap lets both through", func(t *testing.T) {
		a := firstWaveCap(t, t0)
		seqs := tellers(a)
		a.Outcome(seqs[0], succeeded, t0)
		if a.unpaced {
			t.Fatal("the pace went with one teller answered; want both let through first")
		}
		a.Outcome(seqs[1], succeeded, t0)
		if !a.unpaced || a.flightCap != 5 || a.capDoubted {
			t.Fatalf("both tellers let through: unpaced %v, capped at %d, in doubt %v; want unpaced, 5, sure", a.unpaced, a.flightCap, a.capDoubted)
		}
		for i := range 5 {
			if _, delay, _, sent := a.Take(t0); !sent {
				t.Fatalf("request %d of the cap held for %v: the cap alone holds the key", i+1, delay)
			}
		}
	})

	t.Run("one refused for the places sent after it lowers the cap", func(t *testing.T) {
		a := firstWaveCap(t, t0)
		seqs := tellers(a)
		now := sendPaced(t, a, t0, 3)    // paced, after the tellers: they may reach the server first
		a.Outcome(seqs[0], refused, now) // sent with none in flight, answered with 4
		if a.flightCap != 4 || !a.capDoubted || !a.tellerDue() {
			t.Fatalf("a teller refused with 4 others in flight at its answer under a cap of 5 in doubt: capped at %d (in doubt %v, tellers due %v); want 4, in doubt, tellers due",
				a.flightCap, a.capDoubted, a.tellerDue())
		}
	})

	t.Run("one refused with more others than any let through lowers the cap to that many", func(t *testing.T) {
		// The first wave let requests through with 1 other in flight at
		// most, and refused those with 5 and 6: a cap of 5 in doubt, which
		// a teller refused with 3 others shows is 3.
		a := waveCapped(t, t0, 0, 0, 1, 1)
		seqs := tellers(a)
		now := sendPaced(t, a, t0, 2)
		a.Outcome(seqs[0], refused, now) // answered with the other teller and 2 paced ones in flight
		if a.flightCap != 3 || !a.capDoubted || !a.tellerDue() {
			t.Fatalf("a teller refused with 3 others in flight, none let through with more than 1: capped at %d (in doubt %v, tellers due %v); want 3, in doubt, tellers due",
				a.flightCap, a.capDoubted, a.tellerDue())
		}
	})

	t.Run("an empty bucket refuses one", func(t *testing.T) {
		a := firstWaveCap(t, t0)
		pace := a.rate(t0)
		seqs := tellers(a)
		a.Outcome(seqs[1], refused, t0) // sent with the other teller in flight
		if a.flightCap != 0 || a.capDoubted || a.unpaced || a.rate(t0) != pace {
			t.Fatalf("a teller refused with 1 other in flight: capped at %d (in doubt %v, unpaced %v), pace %.1f; want no cap, the pace kept at %.1f",
				a.flightCap, a.capDoubted, a.unpaced, a.rate(t0), pace)
		}
		a.Outcome(seqs[0], succeeded, t0) // a token the bucket refilled
		for range 2 {
			a.Untracked(Answer{Refused: true, Remaining: -1, Flight: 6}, 0, t0)
		}
		if a.flightCap != 0 {
			t.Errorf("the wave's last refusals learned a cap of %d again; want none: the tellers showed it was none", a.flightCap)
		}
	})
}

// TestDoubtedCapTellersHeldByTheHintTellNothing: a first wave refused
// with 5 and 6 others in flight, each refusal asking for a second, shows
// a cap in doubt. Tellers sent before the hint ends tell it from a
// bucket's burst, as ever; but when nothing could go before (every
// request of the wave was refused, and waits for its hint), the first
// request sent once the hint ended is no teller: a bucket's refill, or a
// window's turn, lets anything through by then. The cap ends, and the
// request goes at the search's pace.
func TestDoubtedCapTellersHeldByTheHintTellNothing(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		sendAt time.Duration
		capped bool
	}{{"before the hint ends", 10 * time.Millisecond, true}, {"once it ended", time.Second, false}} {
		a := New(0, math.Inf(1), t0)
		for _, k := range []int{2, 2, 3, 3} {
			a.Untracked(Answer{OK: true, Remaining: -1, Flight: k}, 0, t0)
		}
		for _, k := range []int{5, 6} {
			a.Untracked(Answer{Refused: true, Remaining: -1, Flight: k, Hint: time.Second}, 0, t0)
		}
		if a.flightCap != 5 || !a.capDoubted {
			t.Fatalf("%s: capped at %d, in doubt %v; want 5, in doubt", c.name, a.flightCap, a.capDoubted)
		}
		_, _, _, sent := a.Take(t0.Add(c.sendAt))
		if !sent {
			t.Fatalf("%s: the first request was held; want it sent (a teller, or at the search's pace)", c.name)
		}
		if got := a.flightCap == 5 && a.capDoubted && a.capTellFrom != 0; got != c.capped {
			t.Errorf("%s: capped at %d, in doubt %v, a teller %v; want the cap in doubt, the request its teller: %v",
				c.name, a.flightCap, a.capDoubted, a.capTellFrom != 0, c.capped)
		}
	}
}
