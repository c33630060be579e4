package scopes_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/internal/scopes"
)

// A told scope of one request a second: the engine admits the first
// request of a key at once, and asks the second to wait its turn, which
// the caller does (here it only says so).
func Example() {
	s := scopes.New("api", false, false, time.Minute,
		scopes.Config{Config: limit.Config{MinSpacing: time.Second}}, new(scopes.Shared))
	r := &scopes.Request{
		Ctx:  context.Background,
		Left: func() time.Duration { return time.Minute },
		Wait: func(w scopes.Wait) error {
			fmt.Printf("wait about %v for a turn of %s\n", w.D.Round(time.Second), w.Scope)
			return nil
		},
	}
	for range 2 {
		if _, err := s.Admit(r, "example.com"); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// wait about 1s for a turn of api
}
