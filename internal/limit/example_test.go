package limit_test

import (
	"fmt"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
)

// A key of a told limit of 2 requests a second: two turns now, then one
// each half second. The caller waits each Delay, then says it did.
func Example() {
	cfg := &limit.Config{Rate: 2, Burst: 2}
	var k limit.Key
	k.Init(0, cfg)
	var r limit.Reservation
	for range 4 {
		if err := k.Reserve(&r, false, cfg, 1, time.Time{}); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("wait", r.Delay.Round(100*time.Millisecond))
		if r.Delay > 0 {
			k.Waited(&r, nil) // the caller waited r.Delay
		}
	}
	// Output:
	// wait 0s
	// wait 0s
	// wait 500ms
	// wait 1s
}
