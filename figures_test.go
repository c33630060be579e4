package ratewise

import "testing"

// figuref reports a figure a simulation in fake time missed (a time
// against the ideal, a count of refusals): an error in a plain run, a
// log line under the race detector. Its scheduler wakes the goroutines
// due at one instant of fake time in a shuffled order, which moves a
// refusal or two, so that a figure held to the letter fails a few runs
// in a hundred; make test runs the package without -race too, where the
// figures are held. What no order excuses (a failed call) is an error in
// both.
func figuref(t *testing.T, format string, args ...any) {
	t.Helper()
	if raceEnabled {
		t.Logf("a figure missed under -race, held in the plain run: "+format, args...)
		return
	}
	t.Errorf(format, args...)
}
