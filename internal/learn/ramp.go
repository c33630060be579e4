package learn

import (
	"math"
	"time"
)

// ramp is the learned pace between two refusals, as a Pacer and a Shared
// both keep it: it climbs from rampFrom to rampTo over adaptiveRamp of
// succeeding, holds there for hold, then probes beyond by band, doubling;
// before the first measure, probing doubles it from rampFrom instead. A
// refusal cuts it (cutTo), no lower than the search's floor while that
// stands (floored); a measure between two refusals sets it (setMeasure).
type ramp struct {
	probing          bool
	rampFrom, rampTo float64
	hold             time.Duration // at rampTo before probing beyond: the span of the measure
	band             float64       // the first step beyond rampTo; each next one doubles
	// succeeding is the time spent succeeding since the climb began: the
	// gaps between successes (or a fleet's turns), each bounded.
	succeeding time.Duration
	// searchFloor is the slowest the search for a pace cuts to meanwhile,
	// 0 once released (see blind.go).
	searchFloor float64
	// atFloor is set when a refusal came at or below its hint's floor
	// (see cutTo).
	atFloor bool
	// lastHint is the wait hint of the last refusal no count explained.
	lastHint time.Duration
}

// climbed is where the climb is, in requests a second, before any
// ceiling.
func (r *ramp) climbed() float64 {
	if r.probing {
		return r.rampFrom * math.Exp2(r.succeeding.Seconds()/adaptiveProbeGrowth.Seconds())
	}
	// adaptiveRamp of succeeding takes the climb to its top; as much
	// again doubles the band beyond it.
	done := r.succeeding.Seconds() / adaptiveRamp.Seconds()
	beyond := (r.succeeding - adaptiveRamp - r.hold).Seconds() / adaptiveRamp.Seconds()
	switch {
	case done < 1:
		return r.rampFrom + (r.rampTo-r.rampFrom)*done
	case beyond <= 0:
		return r.rampTo
	}
	return r.rampTo + r.band*(math.Exp2(beyond)-1)
}

// setPace starts a climb from 'from' to 'to', held there for hold, then
// probing beyond by band, never past top; zero band means the climb's, at
// least adaptiveMinBand of 'to'.
func (r *ramp) setPace(from, to, band float64, hold time.Duration, top float64) {
	r.probing, r.hold, r.band = false, hold, band
	if band <= 0 {
		r.band = math.Max(to-from, to*adaptiveMinBand)
	}
	r.rampFrom, r.rampTo = math.Min(from, top), math.Max(math.Min(to, top), 1e-9)
	r.succeeding = 0
}

// setMeasure paces by a measure over span: from its low end, which the
// server can always serve, climbing to its high end, then probing beyond
// (see probeHold). A server whose last refusal asked for a long wait
// (more than a second) is paced at the low end, and probed as seldom as
// can be: each refusal holds its request that long, which a few percent
// more pace does not pay for.
func (r *ramp) setMeasure(low, high float64, span time.Duration, top float64) {
	hold := probeHold(span, low)
	if r.lastHint > time.Second {
		high, hold = low, adaptiveMaxHold
	}
	r.setPace(low, high, 0, hold, top)
}

// search starts the search for a pace from start, no faster than top: it
// halves at each refusal, no lower than an eighth of start until the
// blind test tells (see blind.go), and doubles while requests succeed.
func (r *ramp) search(start, top float64) {
	r.probing, r.rampFrom, r.succeeding = true, math.Min(start, top), 0
	r.searchFloor = start / blindFloorDepth
}

// floored is p, a pace a cut of the search chose, held at the search's
// floor while the floor stands (see blind.go).
func (r *ramp) floored(p float64) float64 {
	if r.searchFloor <= 0 {
		return p
	}
	return math.Max(p, r.searchFloor)
}

// cutTo is rate cut by cut after a refusal whose hint was hint: no lower
// than the hint's floor (floorRate); a rate at the floor already is held
// there once, and cut below the next time it is refused there. A hint
// rounded up to whole seconds, or of a bucket that had partly refilled,
// says a request may pass sooner than the server's rate allows one after
// another. A rate at the floor but for a float's rounding is at it: the
// store's script, in floats, must tell the same.
func (r *ramp) cutTo(rate, cut float64, hint time.Duration) float64 {
	f := floorRate(hint)
	switch {
	case rate > f*(1+1e-9):
		r.atFloor = false
		return math.Max(rate*cut, f)
	case !r.atFloor:
		r.atFloor = true
		return rate
	}
	return math.Max(rate*cut, adaptiveMinRate)
}
