package learn

import (
	"math"
	"testing"
	"time"
)

// A slow start sends its first request alone, and each success lets one
// more be in flight: one, then two, then four at once.
func TestStartDoublesEachRoundTrip(t *testing.T) {
	var s Start
	others, wait := s.Enter()
	if wait != nil || others != 0 {
		t.Fatalf("first Enter = %d, %v; want to go alone", others, wait)
	}
	_, wait = s.Enter()
	if wait == nil {
		t.Fatal("a second request went beside the first before any answer")
	}
	if s.End(true, 0) {
		t.Fatal("done after one success")
	}
	select {
	case <-wait:
	default:
		t.Fatal("an answer did not wake the waiting request")
	}
	for round, want := range []int{2, 4} {
		sent := 0
		for {
			if _, w := s.Enter(); w != nil {
				break
			}
			sent++
		}
		if sent != want {
			t.Fatalf("round %d: %d in flight, want %d", round+2, sent, want)
		}
		for range sent {
			s.End(true, sent-1)
		}
	}
	if s.Passed() != 7 || s.Out() != 0 {
		t.Errorf("Passed %d, Out %d; want 7, 0", s.Passed(), s.Out())
	}
	// By the others End was told of: the first alone, the round of two
	// with 1 other each, the round of four with 3.
	for others, want := range []int{1, 2, 0, 4, 0} {
		if got := s.OKWith(others); got != want {
			t.Errorf("OKWith(%d) = %d, want %d", others, got, want)
		}
	}
}

// A refusal wakes the waiting requests without making room for them.
func TestStartRefusalOpensNothing(t *testing.T) {
	var s Start
	s.Enter()
	_, wait := s.Enter()
	s.End(false, 0)
	<-wait // closed
	if _, w := s.Enter(); w != nil {
		t.Fatal("after a refusal the key has no room for the one request it had")
	}
	if _, w := s.Enter(); w == nil {
		t.Error("a refusal made room for a second request")
	}
}

func TestStartEndsAtStartDone(t *testing.T) {
	var s Start
	done := false
	for i := 0; !done; i++ {
		if i > StartDone {
			t.Fatalf("not done after %d successes", i)
		}
		s.Enter()
		done = s.End(true, 0)
	}
	if s.Passed() != StartDone-1 {
		t.Errorf("done after %d passed, want %d", s.Passed(), StartDone-1)
	}
}

func TestAnsweredRemembersAKeyUntilItLearns(t *testing.T) {
	var a Answered
	const h, other = 7, 2*AnsweredSlots + 7 // odd, one slot
	if a.Has(h) {
		t.Fatal("a key is answered before it is marked")
	}
	a.Mark(h)
	if !a.Has(h) || a.Has(other) {
		t.Fatalf("after Mark: Has = %v, other %v; want true, false", a.Has(h), a.Has(other))
	}
	a.Mark(other) // shares the slot: pushes h out
	if a.Has(h) {
		t.Error("a key pushed out of its slot is still answered")
	}
	a.Learning(other)
	if a.Has(other) {
		t.Error("a learning key is still answered")
	}
}

// TestAnsweredUsesEverySlot: AnsweredSlots keys of consecutive odd
// hashes, as a hash with its lowest bit set gives them, are remembered
// all at once: none shares a slot.
func TestAnsweredUsesEverySlot(t *testing.T) {
	var a Answered
	for i := range uint64(AnsweredSlots) {
		a.Mark(2*i + 1)
	}
	for i := range uint64(AnsweredSlots) {
		if !a.Has(2*i + 1) {
			t.Fatalf("the key of hash %d was pushed out by another: odd hashes share slots", 2*i+1)
		}
	}
}

// A slow start whose requests sent with fewer than c others were let
// through, and one sent with c others refused, shows a cap of c; one
// refused alone, or after a single success, shows none.
func TestStartShowsCap(t *testing.T) {
	start := func(oks ...int) *Start {
		var s Start
		for _, others := range oks {
			s.Enter()
			s.End(true, others)
		}
		return &s
	}
	for _, c := range []struct {
		name    string
		oks     []int
		refused int
		want    bool
	}{
		{"cap of 3", []int{0, 1, 1, 2, 2}, 3, true},
		{"refused with those let through alone", []int{0, 0, 0}, 2, true},
		{"refused alone", []int{0, 1, 1, 2}, 0, false},
		{"one success before", []int{0}, 1, false},
		{"let through with as many others", []int{0, 1, 2, 3, 3, 3}, 3, false},
		{"not sent", []int{0, 1, 1}, -1, false},
	} {
		if got := start(c.oks...).ShowsCap(c.refused); got != c.want {
			t.Errorf("%s: ShowsCap(%d) = %v, want %v", c.name, c.refused, got, c.want)
		}
	}
}

// Requests that find the key's Pacer retired go at once, and a head of
// the line waiting for its place in the pace wakes when it is retired.
func TestRetireLetsTheLineGo(t *testing.T) {
	now := time.Unix(1000, 0)
	p := New(1, math.Inf(1), now) // one a second
	p.Retirable()
	if _, sent := p.TakeAlone(now); !sent {
		t.Fatal("the first request did not go")
	}
	_, delay, ready, sent := p.Take(now)
	if sent || delay <= 0 || ready == nil {
		t.Fatalf("Take = delay %v, ready %v, sent %v; want a wait for the pace that Retire can end", delay, ready, sent)
	}
	if p.Retired() {
		t.Fatal("retired before Retire")
	}
	p.Retire()
	select {
	case <-ready:
	default:
		t.Fatal("Retire did not wake the head of the line")
	}
	for i := range 3 {
		if _, _, _, sent := p.Take(now); !sent {
			t.Fatalf("request %d waited after Retire", i)
		}
	}
	if !p.Retired() {
		t.Error("Retired = false after Retire")
	}
}
