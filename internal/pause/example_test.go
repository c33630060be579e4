package pause_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratewise/ratewise/internal/pause"
)

// A refusal's hint pauses its key: every request to it is told to wait
// the pause out (and a random part of the spread), other keys go at once.
func Example() {
	g := pause.New(pause.Config{Spread: time.Millisecond, IdleTimeout: time.Minute})
	g.Pause(context.Background(), "api.example.com", time.Now().Add(30*time.Second))

	_, left, _ := g.Wait(context.Background(), "api.example.com", time.Time{}, false)
	fmt.Println("paused:", left.Round(time.Second))
	wait, _, _ := g.Wait(context.Background(), "other.example.com", time.Time{}, false)
	fmt.Println("other key waits:", wait)
	// Output:
	// paused: 30s
	// other key waits: 0s
}
