package ratewise

import (
	"errors"
	"fmt"
	"time"

	"github.com/ratewise/ratewise/internal/pause"
	"github.com/ratewise/ratewise/store"
)

// DefaultPauseSpread is how far apart, at most, the requests held by a
// pause are released when [PausePolicy.Spread] is zero.
const DefaultPauseSpread = 250 * time.Millisecond

// DefaultMaxPause is the longest one hint pauses a key: a server
// asking for days, or a year 9999 date, must not stop a process for good.
const DefaultMaxPause = time.Hour

// PausePolicy configures the pause gate: when a response carries a
// wait hint (Retry-After or a reset header, see [WaitHint]) on a refusal,
// every request to that key is held until the hint expires, those already
// waiting and new ones alike, so that one 429 does not become twenty.
// When a limit scope paces the transport, the pace answers hints of a
// second or less, and only longer ones pause the key. The zero value is
// the default: on, keyed by Host, spread DefaultPauseSpread, pauses of
// at most DefaultMaxPause.
type PausePolicy struct {
	// Key maps a request to the key the server limits; nil means Host.
	Key KeyFunc
	// Spread releases held requests over this much time after the pause,
	// each at a random point, so they do not return as a herd; zero means
	// DefaultPauseSpread.
	Spread time.Duration
	// MaxPause is the longest one hint pauses the key; zero means
	// DefaultMaxPause. The call that got a longer hint still ends
	// with its response, since no budget fits the hint; the other requests
	// to the key are held MaxPause, then one goes out to ask again.
	MaxPause time.Duration
	// Off turns the gate off: only the request that was refused waits.
	Off bool
	// IdleTimeout is how long a key's state outlives its pause; zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Store, when set, shares the pauses with every transport given the
	// same store (ratewise/redis, or a MemoryStore): a refusal one process
	// sees pauses the key in all of them. Each request then asks the store
	// whether its key is paused. When the store fails, the gate goes on
	// with the pauses this transport knows, unless the store fails closed:
	// then the request fails with a *ClientLimitError and is not sent.
	Store store.Pauses
}

// WithPause configures the pause gate, which is on by default. A negative
// duration makes every RoundTrip fail with an error naming it, which
// [NewTransport] returns.
func WithPause(p PausePolicy) Option {
	return func(t *Transport) {
		var errs []error
		for _, d := range []struct {
			name  string
			value time.Duration
		}{{"Spread", p.Spread}, {"IdleTimeout", p.IdleTimeout}, {"MaxPause", p.MaxPause}} {
			if d.value < 0 {
				errs = append(errs, fmt.Errorf("ratewise: PausePolicy.%s (%v) must not be negative", d.name, d.value))
			}
		}
		switch {
		case len(errs) > 0:
			t.err = errors.Join(append([]error{t.err}, errs...)...)
		case p.Off:
			t.gate = nil
		default:
			t.gate = newGate(p)
		}
	}
}

// gate is the transport's pause gate: the engine (internal/pause), and
// what of the policy the call reads, its Key and MaxPause.
type gate struct {
	*pause.Gate
	Key      KeyFunc
	MaxPause time.Duration
}

func newGate(p PausePolicy) *gate {
	if p.Key == nil {
		p.Key = Host
	}
	if p.Spread == 0 {
		p.Spread = DefaultPauseSpread
	}
	if p.MaxPause == 0 {
		p.MaxPause = DefaultMaxPause
	}
	return &gate{Key: p.Key, MaxPause: p.MaxPause,
		Gate: pause.New(pause.Config{Spread: p.Spread, IdleTimeout: idleTimeout(p.IdleTimeout), Store: p.Store})}
}
