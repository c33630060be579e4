package breaker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/store"
)

// A caller asks TryLocal before each attempt and tells the outcome through
// the ticket; after two failures the breaker says how long it stays open.
func Example() {
	b := breaker.New(breaker.Config{HalfOpenProbes: 1, SuccessesToClose: 1,
		Rules: store.Rules{ConsecutiveFailures: 2, Window: time.Minute, Decay: time.Hour, ProbeTimeout: time.Minute,
			Cooldowns: []time.Duration{30 * time.Second}}}, nil, time.Minute)
	for range 3 {
		var t breaker.Ticket
		e := b.Acquire("api.example.com")
		v := b.TryLocal(&t, "api.example.com", e)
		if !v.Go {
			b.Release(e)
			fmt.Println("open for", v.OpenFor.Round(time.Second), "after", v.Failures, "failures")
			continue
		}
		t.Sent()
		t.Outcome(context.Background(), breaker.Failure, store.Cause{StatusCode: 503})
		fmt.Println("sent; failed")
	}
	// Output:
	// sent; failed
	// sent; failed
	// open for 30s after 2 failures
}
