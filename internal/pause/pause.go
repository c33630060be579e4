// Package pause is the pause gate: when a server's refusal carries a wait
// hint, every request to its key is held until the hint runs out, those
// already waiting and new ones alike, so that one 429 does not become
// twenty. Held requests are released over a random spread, not as a herd.
//
// A Gate keeps one pause per key; with a store.Pauses, every gate given the
// same store sees the pauses of all. The gate knows nothing of calls: as
// x/time/rate's Reserve, it says how long to wait, and the caller waits
// within its own budget.
package pause

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
	"github.com/ratewise/ratewise/store"
)

// Config is a Gate's configuration, defaults already filled in.
type Config struct {
	// Spread releases held requests over this much time after the pause.
	Spread time.Duration
	// IdleTimeout is how long a key's state outlives its pause.
	IdleTimeout time.Duration
	// Store, when set, shares the pauses with every gate given it.
	Store store.Pauses
}

// StoreClosedError is Wait's error when the store fails closed: the
// request must not be sent.
type StoreClosedError struct{ Err error }

func (e *StoreClosedError) Error() string { return "ratewise: pause store: " + e.Err.Error() }
func (e *StoreClosedError) Unwrap() error { return e.Err }

// Gate is the pause gate at work. It is safe for concurrent use.
type Gate struct {
	cfg    Config
	states *keyed.Map[state]
}

// state is one key's pause.
type state struct {
	until atomic.Int64 // Unix nanoseconds; the pause is over when past
}

// New returns a gate with no key paused.
func New(cfg Config) *Gate {
	return &Gate{cfg: cfg, states: keyed.New(cfg.IdleTimeout, nil, func(st *state, now time.Time) bool {
		return st.until.Load() <= now.UnixNano()
	})}
}

// Store is the store the gate shares its pauses through, or nil.
func (g *Gate) Store() store.Pauses { return g.cfg.Store }

// SetStore shares the gate's pauses through s, before its first use.
func (g *Gate) SetStore(s store.Pauses) { g.cfg.Store = s }

// Pause holds key's requests until until, unless a later pause holds them
// already: the later of two hints wins. With a store, every gate sharing
// it holds them; a store that fails leaves the pause local.
func (g *Gate) Pause(ctx context.Context, key string, until time.Time) {
	g.PauseLocal(key, until)
	if g.cfg.Store != nil {
		_ = g.cfg.Store.Pause(ctx, key, until)
	}
}

// PauseLocal is Pause in this gate only, as when the store's pause is
// mirrored here.
func (g *Gate) PauseLocal(key string, until time.Time) {
	e := g.states.Acquire(key, true)
	defer g.states.Release(e)
	for {
		cur := e.State.until.Load()
		if until.UnixNano() <= cur || e.State.until.CompareAndSwap(cur, until.UnixNano()) {
			return
		}
	}
}

// Len is how many keys the gate holds state for; Keys names them.
func (g *Gate) Len() int { return g.states.Len() }

// Keys names the keys the gate holds state for.
func (g *Gate) Keys() []string { return g.states.Keys() }

// Idle reports whether the gate has nothing to hold: no key paused, no
// store to ask. Then a request's key need not even be computed.
func (g *Gate) Idle() bool { return g.cfg.Store == nil && g.states.Len() == 0 }

// PausedFor returns how long key's pause has left at now, as this gate
// knows it.
func (g *Gate) PausedFor(key string, now time.Time) time.Duration {
	e := g.states.Peek(key)
	if e == nil {
		return 0
	}
	defer g.states.Release(e)
	return max(time.Duration(e.State.until.Load()-now.UnixNano()), 0)
}

// PausedForShared is PausedFor with what the store knows: the later of
// this gate's pause and the store's. A store that fails leaves this
// gate's. It takes no context: the store's calls are bounded by its own
// timeout.
func (g *Gate) PausedForShared(key string, now time.Time) time.Duration {
	left := g.PausedFor(key, now)
	if g.cfg.Store != nil {
		if until, err := g.cfg.Store.PausedUntil(context.Background(), key); err == nil {
			left = max(left, until.Sub(now))
		}
	}
	return left
}

// Paused reports whether key is paused right now; it reads the clock only
// for a key that was paused at some point.
func (g *Gate) Paused(key string) bool {
	e := g.states.Acquire(key, false)
	if e == nil {
		return false
	}
	defer g.states.Release(e)
	return e.State.until.Load() > time.Now().UnixNano()
}

// Wait returns how long a request to key must wait before it goes: key's
// pause left, and a random part of the spread on top; 0 when key is not
// paused. left is the pause alone, for the caller's error. With a store,
// a pause another gate set counts too: asked, the store's answer stands
// for the store (ok false: the store is read with ctx). The caller waits,
// then asks again, as another refusal may have pushed the pause further.
// A store that fails closed ends it with a *StoreClosedError.
func (g *Gate) Wait(ctx context.Context, key string, asked time.Time, ok bool) (wait, left time.Duration, err error) {
	if g.cfg.Store != nil {
		until := asked
		if !ok {
			until, err = g.cfg.Store.PausedUntil(ctx, key)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return 0, 0, ctx.Err()
		case err != nil && store.FailsClosed(err):
			return 0, 0, &StoreClosedError{Err: err}
		case err == nil && until.After(time.Now()):
			g.PauseLocal(key, until) // and waited out below
		}
	}
	e := g.states.Acquire(key, false)
	if e == nil {
		return 0, 0, nil // never paused, or long ago
	}
	defer g.states.Release(e)
	left = time.Duration(e.State.until.Load() - time.Now().UnixNano())
	if left <= 0 {
		return 0, 0, nil
	}
	return left + time.Duration(rand.Int64N(int64(g.cfg.Spread)+1)), left, nil
}
