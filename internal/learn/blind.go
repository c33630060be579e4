package learn

import (
	"math"
	"time"
)

// This file tells refusals that slowing down cures from those it does
// not. A refusal is evidence about rate only if pacing changes it: a
// token bucket, a window or a GCRA refuses a share that falls as the
// pace falls, to none below the server's rate, while a server shedding
// load refuses a share of whatever comes, however slowly it comes.
// Slowing down against such a server only loses the calls that retries
// alone would have completed.
//
// So the Pacer remembers the pace each of its last requests was sent at
// and whether it was let through. When the later half of them, sent at
// well under the pace of the earlier half, was let through about as often
// (a bucket lets through more than twice as often at a third of the pace,
// until it refuses nothing; a window that ran out, much less often, until
// it turns), the refusals are not about rate: the key gives its pace
// back, goes unpaced, and leaves the refusals to the retries, their
// backoff and the breaker, for blindHoldStart, then tries again, holding
// twice as long each time the refusals still prove blind. Meanwhile the
// search for a pace goes no lower than an eighth of where it started
// until a measure shows the server's rate, or the floor has held against
// blindFloorCuts refusals: a slower bucket is reached a few refusals
// later, and a server blind to the pace is told at a pace that answers.

const (
	// blindSamples is how many answered requests the test looks at, the
	// last ones, and blindHalf how many of them each half needs.
	blindSamples = 16
	blindHalf    = 4
	// blindSpread is how much slower, at least, the slower half must
	// have been sent than the faster one.
	blindSpread = 2.0
	// blindHoldStart and blindHoldMax bound how long a key whose
	// refusals proved blind to its pace goes unpaced before it tries
	// again.
	blindHoldStart = 30 * time.Second
	blindHoldMax   = 10 * time.Minute
	// blindFloorDepth is how far below where it started the search for a
	// pace goes before the test has had its chance: a pace that halves at
	// each refusal would otherwise leave it too few answers, too late,
	// when the refusals are blind to it. blindFloorCuts is how many cuts
	// the floor holds against, at most, before the search goes on below.
	blindFloorDepth = 8
	blindFloorCuts  = 8
)

// paceSample is one answered request: the pace it was sent at, and
// whether it was let through (else refused).
type paceSample struct {
	pace float64
	ok   bool
}

// sample notes the answer to request seq, paced at the pace it was sent
// at, with p.mu held; a request sent unpaced, or too long ago to
// remember its pace, is not noted.
func (p *Pacer) sample(seq uint64, ok bool) {
	if seq == 0 || seq+uint64(len(p.sentPace)) <= p.sent {
		return
	}
	pace := p.sentPace[seq%uint64(len(p.sentPace))]
	if pace <= 0 {
		return
	}
	if len(p.samples) == blindSamples {
		copy(p.samples, p.samples[1:])
		p.samples = p.samples[:blindSamples-1]
	}
	p.samples = append(p.samples, paceSample{pace: pace, ok: ok})
}

// rateBlind reports whether the samples show the key's refusals blind to
// its pace, with p.mu held: the later half of them, sent at a pace
// blindSpread times slower than the earlier half or more, was let through
// well under as often as a bucket would have, yet some of the time, and
// not much less often than the earlier half.
func (p *Pacer) rateBlind() bool {
	n := len(p.samples)
	if n < 2*blindHalf {
		return false
	}
	earlyPace, earlyOK := halfOf(p.samples[:n/2])
	latePace, lateOK := halfOf(p.samples[n-n/2:])
	if Trace != nil {
		Trace("blind test: early %.2f/s ok %.2f, late %.2f/s ok %.2f", earlyPace, earlyOK, latePace, lateOK)
	}
	if earlyPace < blindSpread*latePace || lateOK == 0 || lateOK > 0.6 || lateOK < 0.5*earlyOK {
		return false
	}
	// A bucket lets through, at the later pace, what it let through a
	// second at the earlier one: all of it once that is the slower.
	bucket := math.Min(1, earlyOK*earlyPace/latePace)
	return lateOK < 0.6*bucket
}

// halfOf is the geometric mean pace of samples, and the share of them let
// through.
func halfOf(samples []paceSample) (pace, ok float64) {
	var logs float64
	passed := 0
	for _, s := range samples {
		logs += math.Log(s.pace)
		if s.ok {
			passed++
		}
	}
	n := float64(len(samples))
	return math.Exp(logs / n), float64(passed) / n
}

// goBlind gives the key's pace back, with p.mu held: its refusals proved
// blind to it. It goes unpaced until now plus the hold, which doubles
// each time.
func (p *Pacer) goBlind(now time.Time) {
	p.blindHold = min(max(2*p.blindHold, blindHoldStart), blindHoldMax)
	p.blindUntil = now.Add(p.blindHold)
	if Trace != nil {
		Trace("%v blind: refusals do not fall with the pace; unpaced for %v",
			now.Sub(p.firstSend).Round(time.Millisecond), p.blindHold)
	}
	p.unpaced, p.probing, p.next = true, false, time.Time{}
	p.samples = p.samples[:0]
	p.cutAt = p.sent
}

// blind reports whether the key goes unpaced at now, its refusals blind
// to its pace; the refusals then teach nothing.
func (p *Pacer) blind(now time.Time) bool {
	return now.Before(p.blindUntil)
}
