package limit

import "time"

// This file is a told window's answer to a server whose window turned a
// little after the window's turn. A window opened by a request's arrival
// (ulule/limiter's) turns a Window after that request reached the
// server; the told window counts it from when the request started, with
// WindowMargin for the network between. A first request that took longer
// to arrive than those after it (a new connection's handshake) opens the
// server's window later than that margin covers, and the next window's
// first turn, its probe (probe.go), is refused: not because the server
// counts more strictly, but because its window is about to turn, which
// the refusal's count says (its reset is due, cut to its second). Such a
// refusal holds the window's turns back a little (lateStep, doubling at
// each such refusal up to lateTries of them) and the probe is sent again,
// rather than make the window yield; the refused probe's start leaves the
// log, counted in the server's window that ended.

const (
	// lateStep is the first hold after a probe refused by a window about
	// to turn; each such refusal in a row doubles it.
	lateStep = 10 * time.Millisecond
	// lateTries bounds the refusals in a row taken for a window about to
	// turn: one more makes the window yield.
	lateTries = 4
)

// late answers the refusal at now of the window's probe, whose answer
// says the server's window is about to turn (due), with k.mu held, and
// reports whether it did: the probe's starts leave the log, the next
// turn waits for the hold, and the probe is tried again.
func (k *Key) late(due bool, now time.Time) bool {
	p := &k.probe
	if !due || p.out == nil || p.proven || k.yielded || k.lateRefusals >= lateTries {
		return false
	}
	w := &k.window
	for w.n > 0 && !w.last().Before(p.at) {
		w.n-- // the probe's turns, the last taken
	}
	w.notBefore = now.Add(lateStep << k.lateRefusals)
	k.lateRefusals++
	k.endProbe()
	return true
}
