package limit

import "time"

// This file is a told window's reading of its server's turns. A window of
// Burst per Window knows not where the server's windows begin, so it
// counts a Window from each start: it holds to any alignment, and a
// batch's second burst goes a Window after its first. A server whose
// windows are aligned elsewhere (to the clock, say) ends its first one
// sooner, and says so when its answers count the quota: the reset of
// their count is when the window that counted them ends. The starts that
// window counted then leave at its end rather than a Window after they
// started (Key.Align), and the next burst goes when the server's window
// turns, as a client that is told nothing and reads the counts sends it.
//
// A reset given to the second (a Unix time, whole seconds to wait, an
// HTTP-date) may be cut to it: ulule/limiter writes the Unix time of the
// end of its window, which its first request opened, truncated, up to a
// second before the window turns. Such a reset that would free the
// starts less than a second before their own Windows do may be only
// that cut, and is not taken (but by a window of a second or less, whose
// every turn is within that second); a server whose windows are aligned
// to the clock ends them on a whole second, which its reset says
// exactly. Either way, the turns a reset frees come past the first
// window, so they go in the window's probe (probe.go): a refusal of such
// an early probe puts the starts back to their own Windows, and the
// window reads no more resets (Key.Yield), rather than yield; a probe of
// them let through shows the server's turns right, and the window reads
// no more of them either: from then on its bursts go at the server's
// turns by themselves, a Window after the last.

// alignState is where a key's window stands with its server's turns.
type alignState uint8

const (
	// alignTrying: the window takes the resets its answers say.
	alignTrying alignState = iota
	// alignShown: a probe the server's turn freed was let through.
	alignShown
	// alignDistrusted: a probe the server's turn freed was refused; the
	// window counts a Window from each start, as told.
	alignDistrusted
)

// Aligned reports whether k's window takes no more resets (Align): it
// inlines, so that a caller skips reading a count the window would not
// use.
func (k *Key) Aligned() bool { return k.aligned.Load() }

// Align tells k's window that the server counted the request that
// started at start in a window that ends at reset, as the answer's count
// at now said, to the second when coarse: the starts up to start leave
// the window then, rather than a Window after they started, when that is
// sooner. A reset a Window or more after start, or not after it, says
// nothing of when the told window turns, nor does a coarse one less than
// a second before (see above), nor one before a turn already taken; nor
// does any once the window yielded or takes no more resets.
func (k *Key) Align(start, reset time.Time, coarse bool, now time.Time, cfg *Config) {
	if cfg.Window <= 0 || start.IsZero() {
		return
	}
	if !reset.After(start) || reset.Sub(start) >= cfg.Window ||
		coarse && cfg.Window > time.Second && reset.Sub(start) > cfg.Window-time.Second {
		return // nothing early, or perhaps only a reset cut to its second
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	w := &k.window
	if k.yielded || k.aligns != alignTrying || reset.Before(w.turn.Add(-sameTurn)) {
		return
	}
	if reset.After(w.turn.Add(sameTurn)) {
		// A later window's: the starts that left by the turn before
		// are gone before its covers move on.
		w.expire(now, cfg.Window)
		w.turn, w.hold = reset, true
	}
	if start.After(w.covers) {
		w.covers = start
	}
}

// sameTurn is how far apart two resets may be and say the same turn: a
// reset read as a wait from now, on the monotonic clock, moves by the
// nanoseconds the wall clock, which the server's time is read on, slews
// between two answers.
const sameTurn = time.Millisecond

// misaligned answers the refusal of the turn that took start, at now,
// with k.mu held, and reports whether it did: a refusal of the probe a
// server's turn freed early says the window's reset was wrong (cut to
// its second). The starts then go back to their own Windows, without
// the probe's turns, which the server counted in its window that had not
// turned, and the window reads no more resets, rather than yield; the
// probe's waiters take their turns again, from the starts. A refusal of
// another of the probe's turns, answered later, is answered already.
func (k *Key) misaligned(start, now time.Time, cfg *Config) bool {
	p := &k.probe
	switch {
	case k.aligns == alignDistrusted:
		return !start.IsZero() && !start.Before(k.earlyFrom) && !start.After(k.earlyTo)
	case k.aligns != alignTrying || p.out == nil || !p.early:
		return false
	}
	k.earlyFrom, k.earlyTo = p.at, now
	k.window.restore(now, cfg.Burst, cfg.Window, p.at)
	k.settleAlign(alignDistrusted)
	k.endProbe()
	return true
}

// settleAlign ends the window's reading of resets as s, with k.mu held:
// the starts a turn let go early are let go for good.
func (k *Key) settleAlign(s alignState) {
	k.aligns = s
	k.aligned.Store(true)
	k.window.held, k.window.hold = nil, false
}

// alignAnew forgets what the window read of the server's turns, with
// k.mu held: told anew, it reads their resets again.
func (k *Key) alignAnew() {
	w := &k.window
	w.turn, w.covers, w.held, w.hold, w.notBefore = time.Time{}, time.Time{}, nil, false, time.Time{}
	k.aligns, k.earlyFrom, k.earlyTo, k.lateRefusals = alignTrying, time.Time{}, time.Time{}, 0
	k.aligned.Store(false)
}
