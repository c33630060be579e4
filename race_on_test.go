//go:build race

package ratewise

// raceEnabled is set when the tests run under the race detector, whose
// scheduler wakes goroutines due at one instant in a shuffled order.
const raceEnabled = true
