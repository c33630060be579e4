package learn

import "testing"

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
