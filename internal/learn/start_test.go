package learn

import "testing"

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
