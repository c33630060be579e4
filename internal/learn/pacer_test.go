package learn

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

var refused = Answer{Refused: true, Remaining: -1}
var succeeded = Answer{OK: true, Remaining: -1}

// sendAt takes the head of the line's place at now or when it comes, and
// returns the request's number and when it went.
func sendAt(t *testing.T, a *Pacer, now time.Time) (uint64, time.Time) {
	t.Helper()
	for range 100 {
		seq, delay, ready, sent := a.Take(now)
		switch {
		case sent:
			return seq, now
		case delay > 0:
			now = now.Add(delay)
		case ready != nil:
			t.Fatalf("the line waits for an answer at %v", now)
		}
	}
	t.Fatal("no place in the pace after 100 tries")
	return 0, now
}

func TestAdaptiveOneDecreasePerEvent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(100, math.Inf(1), time.Time{})
	now := t0
	var seqs []uint64
	for range 8 {
		var seq uint64
		seq, now = sendAt(t, a, now)
		seqs = append(seqs, seq)
	}
	before := a.rate(now)
	a.Outcome(seqs[0], refused, now)
	after := a.rate(now)
	if want := before * adaptiveCut; math.Abs(after-want) > 1e-9 {
		t.Fatalf("rate after a refusal = %.2f, want %.2f (%.2f cut by %v)", after, want, before, adaptiveCut)
	}
	// Its siblings, sent before the decrease, are the same event.
	for _, seq := range seqs[1:] {
		a.Outcome(seq, refused, now)
	}
	if got := a.rate(now); got != after {
		t.Fatalf("rate after 7 refused siblings = %.2f, want it left at %.2f", got, after)
	}
	// A request sent after the decrease and refused is a new event.
	seq, now := sendAt(t, a, now)
	a.Outcome(seq, refused, now)
	if got := a.rate(now); got >= after {
		t.Errorf("rate after a new refusal = %.2f, want below %.2f", got, after)
	}
}

func TestAdaptiveIncreasesOnlyWhileSucceeding(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(20, math.Inf(1), time.Time{})
	start := a.rate(t0)
	if got := a.rate(t0.Add(time.Hour)); got != start {
		t.Fatalf("rate an idle hour later = %.2f, want it still %.2f", got, start)
	}
	// Requests that fail for another reason than rate do not raise it.
	now := t0
	for range 100 {
		var seq uint64
		seq, now = sendAt(t, a, now)
		a.Outcome(seq, Answer{Remaining: -1}, now)
	}
	if got := a.rate(now); got != start {
		t.Fatalf("rate after 100 failures = %.2f, want it still %.2f", got, start)
	}
	// Successes at the pace do, and more the longer they last.
	var rates []float64
	for range 4 {
		for range 40 {
			var seq uint64
			seq, now = sendAt(t, a, now)
			a.Outcome(seq, succeeded, now)
		}
		rates = append(rates, a.rate(now))
	}
	if rates[0] <= start || !slices.IsSorted(rates) || rates[3] <= rates[0] {
		t.Errorf("rates after 40, 80, 120, 160 successes = %.2f, want each above the last, from above %.2f", rates, start)
	}
}

func TestAdaptiveMeasuresBetweenRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(100, math.Inf(1), time.Time{})
	seq, now := sendAt(t, a, t0)
	a.Outcome(seq, refused, now)
	// The key keeps sending at its pace, and the server lets S through
	// until it refuses again 2s later: it refills S/2 a second, give or
	// take a token.
	mark, s := now, 0
	for now.Sub(mark) < 2*time.Second {
		seq, now = sendAt(t, a, now)
		a.Outcome(seq, succeeded, now)
		s++
	}
	seq, now = sendAt(t, a, now)
	a.Outcome(seq, refused, now)
	span := now.Sub(mark).Seconds()
	if got, want := a.rate(now), float64(s-1)/span; math.Abs(got-want) > 1e-9 {
		t.Errorf("pace after a measure of %d in %.2fs = %.2f, want the low end, %.2f", s, span, got, want)
	}
	// A key whose demand falls below its pace lets the server's bucket
	// fill: the next refusal measures nothing, and only cuts the pace.
	mark = now
	before := a.rate(now)
	for range 20 {
		seq, now = sendAt(t, a, now.Add(time.Second))
		a.Outcome(seq, succeeded, now)
	}
	seq, now = sendAt(t, a, now)
	climbed := a.rate(now)
	a.Outcome(seq, refused, now)
	if got := a.rate(now); math.Abs(got-climbed*adaptiveCut) > 1e-9 {
		t.Errorf("pace after an idle span = %.2f, want a cut of %.2f, not a measure of 20 in %v (from %.2f)",
			got, climbed, now.Sub(mark), before)
	}
}

func TestAdaptiveResumesAtHalfAfterLongPause(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(40, math.Inf(1), time.Time{})
	a.Pause(t0.Add(5 * time.Second))
	seq, now := sendAt(t, a, t0.Add(6*time.Second))
	if got := a.rate(now); got != 20 {
		t.Fatalf("rate after the pause = %.2f, want half of 40", got)
	}
	for range 10 {
		a.Outcome(seq, succeeded, now)
		seq, now = sendAt(t, a, now)
	}
	if got := a.rate(now); got <= 20 || got >= 40 {
		t.Errorf("rate after 10 successes = %.2f, want it climbing from 20 towards 40", got)
	}
	for range 40 {
		a.Outcome(seq, succeeded, now)
		seq, now = sendAt(t, a, now)
	}
	if got := a.rate(now); got < 40 || got > 41 {
		t.Errorf("rate after 50 successes = %.2f, want it back at 40, probing beyond by the 2%% band", got)
	}
}

func TestAdaptiveCeilingHoldsOverAnySpan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, 1, time.Time{}) // a Rate of 1 a second as the ceiling
	for _, at := range []time.Duration{0, 1990 * time.Millisecond} {
		seq, _, _, sent := a.Take(t0.Add(at))
		if !sent {
			t.Fatalf("no request at %v", at)
		}
		a.Outcome(seq, succeeded, t0.Add(at+time.Millisecond))
	}
	// A head a little late must not make up for it with a second request
	// within the interval.
	if _, delay, _, sent := a.Take(t0.Add(2 * time.Second)); sent || delay != 990*time.Millisecond {
		t.Errorf("at 2s: sent %v, delay %v; want a wait of 990ms, a second after the last", sent, delay)
	}
}

// SetTrace sees the Pacer's decisions; a Pacer without one, the default,
// traces nothing and needs none.
func TestSetTraceSeesDecisions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var lines []string
	a := New(100, math.Inf(1), time.Time{})
	a.SetTrace(func(f string, args ...any) { lines = append(lines, fmt.Sprintf(f, args...)) })
	quiet := New(100, math.Inf(1), time.Time{})
	for _, p := range []*Pacer{a, quiet} {
		seq, now := sendAt(t, p, t0)
		p.Outcome(seq, refused, now)
	}
	if len(lines) == 0 || !strings.Contains(lines[0], "decrease") {
		t.Errorf("the trace saw %q, want the refusal's decrease", lines)
	}
}

// A window the key left unused for a while (its demand fell, or a breaker
// held it) and then a turn that gave less than its quota: the key is no
// window, and paces at what the last window gave over the hint that held
// it, not over the time the key left it unused, a pace far below the
// server's that it would keep.
func TestAdaptiveSlidingSeedIsNotSlowedByAnIdleTurn(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hinted := Answer{Refused: true, Remaining: -1, Hint: 10 * time.Second}
	a := New(0, math.Inf(1), time.Time{})
	// sendN sends n requests from now, each let through, then one the
	// server refuses with a hint of 10s, and returns when that was.
	sendN := func(now time.Time, n int) time.Time {
		var seq uint64
		for range n {
			seq, now = sendAt(t, a, now)
			a.Outcome(seq, succeeded, now)
		}
		seq, now = sendAt(t, a, now)
		a.Outcome(seq, hinted, now)
		return now
	}
	now := sendN(t0, 30) // the first window: 30, then held 10s
	if a.WindowHeldUntil().IsZero() {
		t.Fatal("a refusal with a hint of 10s did not hold the key as a window's")
	}
	// The window turns: one request, then nothing for two minutes, then
	// the rest of the quota and its refusal.
	seq, now := sendAt(t, a, now)
	a.Outcome(seq, succeeded, now)
	now = sendN(now.Add(2*time.Minute), 28)
	// The next turn gives 2: a sliding window, whose last turn gave 29
	// and held the key 10s.
	now = sendN(now, 2)
	if got, low := a.rate(now), 28/10.0; math.Abs(got-low) > 1e-9 {
		t.Errorf("pace once no window = %.3f/s, want %.3f/s: 29 over the 10s the hint held the key, not over the 2m the key left the turn unused", got, low)
	}
}
