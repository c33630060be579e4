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
		if got := f.capAt(); got != tt.want {
			t.Errorf("%s: capAt() = %d, want %d", tt.name, got, tt.want)
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
