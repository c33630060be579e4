package limit

import (
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"
)

// turn is a place taken in a key's pace, which can be given back when the
// request does not wait for it after all. Acquire's turns are n places at
// once.
type turn struct {
	reservation *rate.Reservation // future tokens of the bucket
	spacedTo    time.Time         // the nextStart this turn set, with MinSpacing
	before      time.Time         // the nextStart before it
	windowAt    time.Time         // the start this turn took, with a Window
	windowN     int               // how many starts it took there
	windowEarly bool              // set when a server's turn (align.go) made it earlier
	// windowFreed is the newest start pushed out of the window to make
	// room for windowAt, and windowFreedOlder the older ones, oldest
	// first, when it took more than one.
	windowFreed      time.Time
	windowFreedOlder []time.Time
	windowHeld       int  // how many of them the log's held keeps (align.go)
	again            bool // no place was taken: wait, then try again
}

// Reservation is a request's place in a key's pace: it goes after Delay.
// With a Probe, it has none yet: another request probes a told window,
// and the caller waits for its answer (until ProbeUntil at most), then
// reserves again. Probing is set when the turn is the window's probe,
// whose answer the caller tells.
type Reservation struct {
	Delay      time.Duration
	Probe      <-chan struct{}
	ProbeUntil time.Time
	Probing    bool
	turn       turn
}

// Reserve takes n turns of k's pace (1 for a request) into r, and says in
// r.Delay how long until they come: 0 when at once, or when nothing paces
// (r is the caller's, so that the hot path copies no turn). It reads the
// clock under k's lock, so that the bucket sees its times in order: an
// earlier time after a later one would make it count tokens twice. A
// request that must wait is counted among k's waiters until Waited; one
// that may not wait so long (until deadline, zero for none) gets a
// *Refusal and takes nothing. low marks a low-priority request, which
// leaves Reserve tokens in the bucket.
func (k *Key) Reserve(r *Reservation, low bool, cfg *Config, n int, deadline time.Time) error {
	return k.reserve(r, low, cfg, n, deadline, false)
}

// ReserveAnswered is Reserve of one turn for a request whose answer the
// caller tells (ProbeAnswered, Yield): a told window may then send it as
// its probe (see probe.go), or, while another request probes, set
// r.Probe for the caller to wait on before it reserves again.
func (k *Key) ReserveAnswered(r *Reservation, low bool, cfg *Config, deadline time.Time) error {
	return k.reserve(r, low, cfg, 1, deadline, !cfg.FailFast)
}

func (k *Key) reserve(r *Reservation, low bool, cfg *Config, n int, deadline time.Time, answered bool) error {
	*r = Reservation{}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bucket == nil && cfg.MinSpacing <= 0 && cfg.Window <= 0 { // CatchUp may change the bucket: read it locked
		return nil
	}
	now := time.Now()
	if answered && cfg.Window > 0 && k.awaitProbe(r, now, cfg) {
		return nil
	}
	delay := k.takeTurn(&r.turn, now, low, cfg, n)
	if answered && cfg.Window > 0 {
		k.noteWindowTurn(r, now.Add(delay), cfg)
	}
	if delay <= 0 {
		return nil
	}
	if err := k.mayWaitLocked(delay, now, deadline, cfg); err != nil {
		k.giveBackTurn(&r.turn, now)
		if r.Probing {
			k.unprobe() // not sent
		}
		return err
	}
	k.waiting++
	r.Delay = delay
	return nil
}

// Waited ends the wait of a Reservation with a Delay: err not nil gives
// its turns back. It reports whether the request must Reserve again:
// a low-priority request that only waited for the Reserve to fill.
func (k *Key) Waited(r *Reservation, err error) (again bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.waiting--
	if err != nil {
		k.giveBackTurn(&r.turn, time.Now())
		if r.Probing {
			k.unprobe() // not sent
		}
		return false
	}
	return r.turn.again
}

// takeTurn takes n places in the pace, with k.mu held, and returns how
// long until they come: n tokens of the bucket, n starts of the window,
// or n gaps of the spacing, the first of which is the caller's.
// t is the caller's, zero.
func (k *Key) takeTurn(t *turn, now time.Time, low bool, cfg *Config, n int) time.Duration {
	if cfg.Window > 0 && !k.yielded {
		var d time.Duration
		d, *t = k.window.take(now, cfg.Burst, cfg.Window, n)
		return d
	}
	if k.bucket == nil {
		var gap time.Duration
		if cfg.Window > 0 {
			gap = yieldGap(cfg)
		} else {
			gap = spacingGap(cfg)
		}
		start := now
		if k.nextStart.After(now) {
			start = k.nextStart
		}
		t.before, t.spacedTo = k.nextStart, start.Add(time.Duration(n)*gap)
		k.nextStart = t.spacedTo
		return start.Sub(now)
	}
	if low && cfg.Reserve > 0 {
		// Low priority leaves Reserve tokens: wait until n more are there.
		need := float64(cfg.Reserve+n) - k.bucket.TokensAt(now)
		if need > 0 {
			t.again = true
			return TurnDelay(time.Duration(need / float64(k.bucket.Limit()) * float64(time.Second)))
		}
	}
	if k.bucket.AllowN(now, n) {
		return 0
	}
	r := k.bucket.ReserveN(now, n)
	t.reservation = r
	return TurnDelay(r.DelayFrom(now))
}

// TurnDelay is a bucket's delay, rounded up to the microsecond: a
// rate.Limiter counts its tokens in floats, and a turn it gives can come
// a nanosecond before a server's own count, in whole nanoseconds, has
// the token (a GCRA's refuses it).
func TurnDelay(d time.Duration) time.Duration {
	if r := d % time.Microsecond; r > 0 {
		d += time.Microsecond - r
	}
	return d
}

// giveBackTurn undoes takeTurn for a request that will not go, with k.mu
// held: the token returns to the bucket, and a spacing slot or a window's
// turn nobody queued behind is freed.
func (k *Key) giveBackTurn(t *turn, now time.Time) {
	switch {
	case t.reservation != nil:
		t.reservation.CancelAt(now)
	case !t.windowAt.IsZero():
		k.window.giveBack(*t)
	case !t.spacedTo.IsZero() && k.nextStart.Equal(t.spacedTo):
		k.nextStart = t.before
	}
}

// yieldGap is the gap between the turns of a window that yielded:
// Burst−½ per Window, evenly. A sliding-window counter of Burst per
// Window weighs the last window's count into this one's: at Burst per
// Window its count sits on the limit, and one request now and then is
// refused; half a request below, it never is, and the spread costs a
// window 1/(2·Burst) of its quota (Burst−1 cost twice that: 0.03 of
// the least time at 30 per 10 s). A window of one, which sends one turn
// a Window however it is spread, keeps that gap.
func yieldGap(cfg *Config) time.Duration {
	if cfg.Burst <= 1 {
		return cfg.Window
	}
	return 2 * cfg.Window / time.Duration(2*cfg.Burst-1)
}

// Yield answers the refusal of the turn of k's window that took start
// (zero when unknown): it spreads the turns of k's window from now on, Window/(Burst−½)
// apart (yieldGap), the first of them a gap after now: the server refused a turn the
// window gave at once, so it counts more strictly than a fixed window of
// Burst per Window (a sliding-window counter weighs the last window in),
// and the rest of the window's quota sent at once would be refused too.
// A refusal of a probe that a server's turn freed early (align.go)
// says the turn was wrong instead: the window counts its starts' own
// Windows again, does not yield, and Yield reports true (early): the
// refusal was the window's own doing, nothing of the server to learn.
// So does a refusal of a probe whose answer says the server's window is
// about to turn (due: its reset is past, cut to its second): the probe
// goes again a little later (late.go).
func (k *Key) Yield(start, now time.Time, due bool, cfg *Config) (early bool) {
	if cfg.Window <= 0 {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.misaligned(start, now, cfg) {
		return true // the turn came early by a reset cut to its second: the starts hold again
	}
	if k.late(due, now) {
		return true // the server's window is about to turn: the probe goes again, a little later
	}
	k.endProbe()
	if !k.yielded {
		k.yielded = true
		k.aligned.Store(true) // a spread reads no resets
		k.nextStart = now.Add(yieldGap(cfg))
	}
	return false
}

// WindowTurn reports whether r is a turn a window gave from its count,
// as it gives them before it yields (Key.Yield), rather than a spread
// one.
func (r *Reservation) WindowTurn() bool { return !r.turn.windowAt.IsZero() }

// WindowStart is the start r took in the window's count, as a
// WindowTurn; zero when it is not one.
func (r *Reservation) WindowStart() time.Time { return r.turn.windowAt }

// spacingGap draws the gap after a request start: MinSpacing ±
// SpacingJitter.
func spacingGap(cfg *Config) time.Duration {
	gap := float64(cfg.MinSpacing)
	if cfg.SpacingJitter > 0 {
		gap *= 1 + cfg.SpacingJitter*(2*rand.Float64()-1)
	}
	return time.Duration(gap)
}
