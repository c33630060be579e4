package faults

import (
	"testing"

	"github.com/rs/zerolog"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine of ratewise, net/http or the
// redis client outlives the tests: every server, connection and wait the
// toxics broke has ended. toxiproxy's own goroutines are left out: its
// links may stay blocked on a channel after their proxy stops (v2.5.0),
// which is toxiproxy's to fix, not a leak of the code under test.
func TestMain(m *testing.M) {
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxiproxy's toxics log to zerolog's global logger
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
	)
}
