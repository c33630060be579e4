package pause

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
)

// caller is a call that waits as the transport's does, in fake time: it
// asks Wait, waits, and asks again until Wait says go. A budget below a
// wait refuses it. prefetch is the store's answer asked ahead, used once.
type caller struct {
	ctx      context.Context
	budget   time.Duration // 0: no bound
	waits    []time.Duration
	prefetch map[string]time.Time
}

var errBudget = errors.New("past the budget")

func (c *caller) admit(g *Gate, key string) error {
	for {
		asked, ok := c.prefetch[key]
		delete(c.prefetch, key)
		d, left, err := g.Wait(c.ctx, key, asked, ok)
		if err != nil || d == 0 {
			return err
		}
		if c.budget > 0 && d > c.budget {
			return fmt.Errorf("%s is paused for %v: %w", key, left, errBudget)
		}
		c.waits = append(c.waits, d)
		time.Sleep(d)
	}
}

// pauses is a store.Pauses in memory that can fail.
type pauses struct {
	until map[string]time.Time
	err   error
	asked int
}

func (p *pauses) Pause(_ context.Context, key string, until time.Time) error {
	if p.err != nil {
		return p.err
	}
	if until.After(p.until[key]) {
		p.until[key] = until
	}
	return nil
}

func (p *pauses) PausedUntil(_ context.Context, key string) (time.Time, error) {
	p.asked++
	return p.until[key], p.err
}

func newCaller() *caller { return &caller{ctx: context.Background()} }

func TestLaterHintWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Spread: time.Second, IdleTimeout: time.Minute})
		now := time.Now()
		g.PauseLocal("k", now.Add(5*time.Second))
		g.PauseLocal("k", now.Add(2*time.Second))
		if got := g.PausedFor("k", now); got != 5*time.Second {
			t.Errorf("after hints of 5s then 2s: PausedFor = %v, want 5s", got)
		}
		g.PauseLocal("k", now.Add(9*time.Second))
		if got := g.PausedFor("k", now); got != 9*time.Second {
			t.Errorf("after a hint of 9s: PausedFor = %v, want 9s", got)
		}
		if got := g.PausedFor("other", now); got != 0 {
			t.Errorf("another key: PausedFor = %v, want 0", got)
		}
	})
}

func TestStateKeptWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Spread: time.Second, IdleTimeout: time.Minute})
		g.PauseLocal("paused", time.Now().Add(time.Hour))
		g.PauseLocal("brief", time.Now().Add(time.Second))
		for i := range 4 {
			time.Sleep(time.Minute)
			g.PauseLocal(fmt.Sprintf("other-%d", i), time.Now()) // new keys bring sweeps
		}
		if got := g.PausedFor("paused", time.Now()); got != 56*time.Minute {
			t.Errorf("a 1h pause after 4m: %v left, want 56m: it must not be evicted", got)
		}
		if e := g.states.Acquire("brief", false); e != nil {
			t.Error("a pause over for minutes is still held")
		}
	})
}

// Wait is the pause and a part of the spread, then 0: the call goes;
// a key never paused costs no wait, and the gate is idle until a pause.
func TestWaitIsThePauseAndASpread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Spread: time.Second, IdleTimeout: time.Minute})
		if !g.Idle() {
			t.Fatal("a new gate without a store is not idle")
		}
		c := newCaller()
		if err := c.admit(g, "k"); err != nil || len(c.waits) != 0 {
			t.Fatalf("Wait of a key never paused = %v after waits %v; want nil, none", err, c.waits)
		}
		g.Pause(context.Background(), "k", time.Now().Add(5*time.Second))
		if g.Idle() || !g.Paused("k") {
			t.Fatal("a paused key: the gate is idle, or the key not paused")
		}
		start := time.Now()
		if err := c.admit(g, "k"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); len(c.waits) != 1 || took < 5*time.Second || took > 6*time.Second {
			t.Errorf("Wait took %v in waits %v; want one wait of 5s to 6s", took, c.waits)
		}
		if g.Paused("k") {
			t.Error("the key is still paused after its pause ran out")
		}
	})
}

// Wait says how long the pause has left apart from the spread, for the
// caller's error when the wait does not fit its budget.
func TestWaitSaysThePauseLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := New(Config{Spread: time.Nanosecond, IdleTimeout: time.Minute})
		g.Pause(context.Background(), "k", time.Now().Add(time.Minute))
		c := newCaller()
		c.budget = time.Second
		err := c.admit(g, "k")
		if want := "k is paused for 1m0s: past the budget"; err == nil || err.Error() != want {
			t.Errorf("admit = %v, want %q", err, want)
		}
	})
}

// With a store, a pause another gate set holds this gate's calls: the
// prefetched answer stands for the first look, the store is asked after.
func TestWaitHoldsForTheStoresPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := &pauses{until: map[string]time.Time{}}
		a := New(Config{Spread: time.Nanosecond, IdleTimeout: time.Minute, Store: shared})
		b := New(Config{Spread: time.Nanosecond, IdleTimeout: time.Minute, Store: shared})
		a.Pause(context.Background(), "k", time.Now().Add(3*time.Second))
		if got := b.PausedForShared("k", time.Now()); got != 3*time.Second {
			t.Errorf("b.PausedForShared = %v, want a's 3s", got)
		}
		c := newCaller()
		c.prefetch = map[string]time.Time{"k": time.Now().Add(3 * time.Second)}
		start := time.Now()
		if err := c.admit(b, "k"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 3*time.Second || took > 3*time.Second+time.Millisecond {
			t.Errorf("b held a call %v; want a's 3s", took)
		}
		// The prefetched answer stood for the first look: one read after the wait.
		if shared.asked != 2 { // one by PausedForShared, one after the wait
			t.Errorf("the store was asked %d times, want 2", shared.asked)
		}
	})
}

// A store that fails closed refuses the call with a *StoreClosedError; one
// that fails otherwise leaves the gate its own pauses.
func TestWaitWhenTheStoreFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closed := &pauses{until: map[string]time.Time{}, err: fmt.Errorf("down: %w", store.ErrUnavailable)}
		g := New(Config{Spread: time.Nanosecond, IdleTimeout: time.Minute, Store: closed})
		var sc *StoreClosedError
		if err := newCaller().admit(g, "k"); !errors.As(err, &sc) || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Wait through a store failing closed = %v, want a *StoreClosedError", err)
		}
		open := &pauses{until: map[string]time.Time{}, err: errors.New("down")}
		g = New(Config{Spread: time.Nanosecond, IdleTimeout: time.Minute, Store: open})
		if err := newCaller().admit(g, "k"); err != nil {
			t.Errorf("Wait through a store failing open, nothing paused = %v, want nil", err)
		}
		g.Pause(context.Background(), "k", time.Now().Add(time.Second))
		start := time.Now()
		if err := newCaller().admit(g, "k"); err != nil || time.Since(start) < time.Second {
			t.Errorf("Wait = %v after %v; want the local pause of 1s waited", err, time.Since(start))
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		c := newCaller()
		c.ctx = ctx
		if err := c.admit(g, "k"); !errors.Is(err, context.Canceled) {
			t.Errorf("Wait of a cancelled call with the store failing = %v, want context.Canceled", err)
		}
	})
}
