package main

import "testing"

func TestBreakingAllowed(t *testing.T) {
	for _, c := range []struct {
		last, next string
		want       bool
	}{
		{"v0.1.0", "v0.1.0", false}, // not yet a new release
		{"v0.1.0", "v0.1.1", false}, // a patch keeps the API
		{"v0.1.3", "v0.2.0", true},  // before v1, a minor may break it
		{"v1.2.0", "v1.3.0", false}, // from v1, a minor may not
		{"v1.2.0", "v2.0.0", true},
		{"v0.2.0", "v0.1.0", false}, // going back is no release
	} {
		if got := breakingAllowed(c.last, c.next); got != c.want {
			t.Errorf("breakingAllowed(%s, %s) = %v, want %v", c.last, c.next, got, c.want)
		}
	}
}
