package ratewise

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/store"
)

// DefaultCooldownSpread is how far apart, at most, the requests held by a
// cooldown are released when [CooldownPolicy.Spread] is zero.
const DefaultCooldownSpread = 250 * time.Millisecond

// DefaultCooldownMaxPause is the longest one hint pauses a key: a server
// asking for days, or a year 9999 date, must not stop a process for good.
const DefaultCooldownMaxPause = time.Hour

// CooldownPolicy configures the cooldown gate: when a response carries a
// wait hint (Retry-After or a reset header, see [WaitHint]) on a refusal,
// every request to that key is held until the hint expires, those already
// waiting and new ones alike, so that one 429 does not become twenty.
// When a limit scope paces the transport, the pace answers hints of a
// second or less, and only longer ones pause the key. The zero value is
// the default: on, keyed by Host, spread DefaultCooldownSpread, pauses of
// at most DefaultCooldownMaxPause.
type CooldownPolicy struct {
	// Key maps a request to the key the server limits; nil means Host.
	Key KeyFunc
	// Spread releases held requests over this much time after the pause,
	// each at a random point, so they do not return as a herd; zero means
	// DefaultCooldownSpread.
	Spread time.Duration
	// MaxPause is the longest one hint pauses the key; zero means
	// DefaultCooldownMaxPause. The call that got a longer hint still ends
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
	// then the request fails with a *LimitError and is not sent.
	Store store.Pauses
}

// WithCooldown configures the cooldown gate, which is on by default.
func WithCooldown(p CooldownPolicy) Option {
	return func(t *Transport) {
		var errs []error
		for _, d := range []struct {
			name  string
			value time.Duration
		}{{"Spread", p.Spread}, {"IdleTimeout", p.IdleTimeout}, {"MaxPause", p.MaxPause}} {
			if d.value < 0 {
				errs = append(errs, fmt.Errorf("ratewise: CooldownPolicy.%s (%v) must not be negative", d.name, d.value))
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

// gate is the cooldown gate at work.
type gate struct {
	CooldownPolicy
	states *keyed.Map[gateState]
}

// gateState is one key's pause.
type gateState struct {
	until atomic.Int64 // Unix nanoseconds; the pause is over when past
}

func newGate(p CooldownPolicy) *gate {
	if p.Key == nil {
		p.Key = Host
	}
	if p.Spread == 0 {
		p.Spread = DefaultCooldownSpread
	}
	if p.MaxPause == 0 {
		p.MaxPause = DefaultCooldownMaxPause
	}
	return &gate{CooldownPolicy: p, states: keyed.New(idleTimeout(p.IdleTimeout), nil, func(st *gateState, now time.Time) bool {
		return st.until.Load() <= now.UnixNano()
	})}
}

// pause holds key's requests until until, unless a later pause holds them
// already: the later of two hints wins. With a store, every transport
// sharing it holds them; a store that fails leaves the pause local.
func (g *gate) pause(ctx context.Context, key string, until time.Time) {
	g.pauseLocal(key, until)
	if g.Store != nil {
		_ = g.Store.Pause(ctx, key, until)
	}
}

// pauseLocal is pause in this transport only.
func (g *gate) pauseLocal(key string, until time.Time) {
	e := g.states.Acquire(key, true)
	defer g.states.Release(e)
	for {
		cur := e.State.until.Load()
		if until.UnixNano() <= cur || e.State.until.CompareAndSwap(cur, until.UnixNano()) {
			return
		}
	}
}

// idle reports whether the gate has nothing to hold: no key paused, no
// store to ask. Then a request's key need not even be computed.
func (g *gate) idle() bool { return g.Store == nil && g.states.Len() == 0 }

// pausedFor returns how long key's pause has left.
func (g *gate) pausedFor(key string, now time.Time) time.Duration {
	e := g.states.Peek(key)
	if e == nil {
		return 0
	}
	defer g.states.Release(e)
	return max(time.Duration(e.State.until.Load()-now.UnixNano()), 0)
}

// pausedForShared is pausedFor with what the store knows: the later of
// this transport's pause and the store's, which another transport may
// have set. A store that fails leaves this transport's. Status reads take
// no context: the store's calls are bounded by its own timeout.
func (g *gate) pausedForShared(key string, now time.Time) time.Duration {
	left := g.pausedFor(key, now)
	if g.Store != nil {
		if until, err := g.Store.PausedUntil(context.Background(), key); err == nil {
			left = max(left, until.Sub(now))
		}
	}
	return left
}

// paused reports whether key is paused right now; it reads the clock only
// for a key that was paused at some point.
func (g *gate) paused(key string) bool {
	e := g.states.Acquire(key, false)
	if e == nil {
		return false
	}
	defer g.states.Release(e)
	return e.State.until.Load() > time.Now().UnixNano()
}

// admit waits out key's pause, if any, and a random part of the spread.
// With a store, a pause another transport set counts too, read again
// after each wait: another transport may have pushed it further meanwhile.
func (g *gate) admit(c *call, key string) error {
	for {
		if g.Store != nil {
			until, ok := c.pre.pauseAnswer(key)
			var err error
			if !ok {
				until, err = g.Store.PausedUntil(c.ctx, key)
			}
			switch {
			case err != nil && c.ctx.Err() != nil:
				return c.ctx.Err()
			case err != nil && storeFailedClosed(err):
				return &LimitError{Scope: "cooldown", Key: key, Reason: "store-unavailable", Err: err}
			case err == nil && until.After(time.Now()):
				g.pauseLocal(key, until) // and wait it out below
			}
		}
		waited, err := g.waitOut(c, key)
		if !waited || err != nil {
			return err
		}
		// Look again: another refusal may have pushed the pause further.
	}
}

// waitOut waits once for key's pause as this transport knows it, and a
// random part of the spread. It reports waited false when key is not
// paused.
func (g *gate) waitOut(c *call, key string) (waited bool, err error) {
	e := g.states.Acquire(key, false)
	if e == nil {
		return false, nil // never paused, or long ago
	}
	defer g.states.Release(e)
	left := time.Duration(e.State.until.Load() - time.Now().UnixNano())
	if left <= 0 {
		return false, nil
	}
	d := left + time.Duration(rand.Int64N(int64(g.Spread)+1))
	if err := c.waitAdmission(d, WaitCooldown); err != nil {
		return true, fmt.Errorf("ratewise: %s is paused for %v at the server's request: %w", key, left, err)
	}
	return true, nil
}
