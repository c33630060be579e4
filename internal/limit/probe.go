package limit

import "time"

// This file is a told window's probe. A window of Burst per Window gives
// a key's turns at once, as a fixed window lets them through; a server
// that counts more strictly (a sliding-window counter, which weighs the
// last window's count into the current one) lets a few through at the
// boundary and refuses the rest of the second burst, every request of it
// in flight, before the first refusal can make the window yield
// (Key.Yield). So past the first window (once the window's log was
// full), the window's turns go in probes that double, as a slow start
// does: one request alone, then two, four, and so on, each probe's turns
// waiting for the answers of the one before (Reservation.Probe). A
// refusal makes the window yield, and the rest is spread; a probe as
// large as Burst, let through whole, proves the window, whose turns then
// go at once for good. It costs a fixed window a few round trips, once.

// windowProbe is a key's window probe; guarded by Key.mu.
type windowProbe struct {
	// armed is set once the window's log was full: the next turn is past
	// the first window. proven is set once a probe of Burst turns was
	// let through.
	armed, proven bool
	// size is how many turns the current probe takes (1, 2, 4, ...,
	// Burst at most);
	// taken of them were taken and pending are not answered yet. out is
	// closed when the probe is whole and answered, and the next may
	// start; nil when none runs. at is when its first turn was to be
	// sent.
	size, taken, pending int
	// failed is set when a turn of the probe was not let through for a
	// reason of its own (not sent, a network error): the probe is tried
	// again at the same size.
	failed bool
	// early is set when a server's turn (align.go) freed a turn of the
	// probe before its start's Window was out.
	early bool
	out   chan struct{}
	at    time.Time
}

// probeWait bounds how long turns wait for a probe's answers: a probe
// whose answers are this late is taken for lost, and the next starts.
func probeWait(cfg *Config) time.Duration { return min(cfg.Window, time.Second) }

// awaitProbe sets r to wait for the probe that runs, when it has all its
// turns and the window is not proven, and reports whether it did. With
// k.mu held.
func (k *Key) awaitProbe(r *Reservation, now time.Time, cfg *Config) bool {
	p := &k.probe
	if p.out == nil || p.proven || k.yielded || p.taken < p.size {
		return false
	}
	until := p.at.Add(probeWait(cfg))
	if !now.Before(until) {
		k.endProbe() // lost: the next turn starts another
		return false
	}
	r.Probe, r.ProbeUntil = p.out, until
	return true
}

// noteWindowTurn makes the turn r took at start one of the window's
// probe, when the window is past its first and not proven, and arms the
// probe once the window's log is full. With k.mu held.
func (k *Key) noteWindowTurn(r *Reservation, start time.Time, cfg *Config) {
	p := &k.probe
	switch {
	case k.yielded || p.proven || r.turn.windowAt.IsZero():
	case p.armed:
		if p.out == nil {
			p.out, p.at, p.taken, p.pending, p.failed, p.early = make(chan struct{}), start, 0, 0, false, false
			p.size = max(p.size, 1)
		}
		p.early = p.early || r.turn.windowEarly
		p.taken++
		p.pending++
		r.Probing = true
	case k.window.n >= cfg.Burst:
		p.armed = true
	}
}

// ProbeAnswered tells k the answer to a turn of its window's probe: let
// through (ok), or not (a network error, a request not sent). A refusal
// goes to Yield instead. Once every turn of the probe is answered, the
// next may start: twice as large when all were let through, and the
// window is proven once one as large as its Burst was.
func (k *Key) ProbeAnswered(ok bool, cfg *Config) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := &k.probe
	if p.out == nil || p.pending == 0 {
		return // a lost probe's late answer
	}
	p.pending--
	p.failed = p.failed || !ok
	if p.pending > 0 || p.taken < p.size && ok {
		return
	}
	if !p.failed {
		p.proven = p.size >= cfg.Burst
		p.size = min(2*p.size, cfg.Burst)
		if p.early && k.aligns == alignTrying {
			k.settleAlign(alignShown) // the server's turn was right
		}
		k.lateRefusals = 0
	}
	k.endProbe()
}

// endProbe ends the probe that runs, if any, with k.mu held: the turns
// waiting for it go.
func (k *Key) endProbe() {
	p := &k.probe
	if p.out != nil {
		close(p.out)
		p.out = nil
	}
	p.taken, p.pending = 0, 0
}

// unprobe gives back a turn of the probe that will not be sent, with
// k.mu held: its place in the probe goes to the next turn.
func (k *Key) unprobe() {
	p := &k.probe
	if p.out != nil && p.pending > 0 {
		p.taken--
		p.pending--
	}
}
