package store

import "testing"

func TestStateString(t *testing.T) {
	tests := []struct {
		give State
		want string
	}{
		{Closed, "closed"},
		{HalfOpen, "half-open"},
		{Open, "open"},
		{State(7), "State(7)"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(tt.give), got, tt.want)
		}
	}
}
