package learn

import (
	"math"
	"time"
)

// Status is what a Pacer has learned of its key at one moment, as
// Snapshot reports it.
type Status struct {
	// Rate is the pace, in requests a second: the ceiling while nothing
	// paces the key, +Inf without one.
	Rate float64
	// InFlight counts the requests let go and not answered, Queued those
	// in the line, its head included.
	InFlight, Queued int
	// Counted is set while the server counts its quota: Remaining is its
	// last count, and Refill what it surely refills a second, no more
	// than the ceiling.
	Counted   bool
	Remaining int
	Refill    float64
	// Windowed is set while the key is taken for a window's: Quota is
	// what the last window let through (0 before one was counted), and
	// HeldFor how long until it reopens, 0 while it is open.
	Windowed bool
	Quota    int
	HeldFor  time.Duration
	// FlightCap is the cap on the key's requests in flight the server
	// showed, 0 for none. Blind is set while the key goes unpaced, its
	// refusals blind to its pace.
	FlightCap int
	Blind     bool
}

// Snapshot reports what the Pacer has learned at now. It changes nothing.
func (p *Pacer) Snapshot(now time.Time) Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Status{Rate: p.rate(now), InFlight: p.inFlight, Queued: p.queued, FlightCap: p.flightCap, Blind: p.blind(now)}
	if c := p.count; c != nil {
		s.Counted, s.Remaining = true, c.remaining
		s.Refill = math.Min(c.refill(), p.ceiling)
	}
	if w := p.win; w != nil {
		s.Windowed, s.Quota = true, w.quota
		s.HeldFor = max(w.opens.Sub(now), 0)
	}
	return s
}
