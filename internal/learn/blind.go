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
// So the Pacer notes, of each request sent at a learned pace, the pace
// and whether it was let through, and weighs two readings of them at each
// refusal: a shedder's, that lets through one share of requests at any
// pace, and a bucket's, that lets through a rate, so that a request sent
// at p passes with the chance rate/p, and all of them below the rate.
// Each reading takes the share or the rate that best explains the
// answers. While the pace has not varied, the two explain them alike and
// the test waits; as it falls, what the answers at the first paces and
// at the last say grows with every answer, however few let through at
// each, so that neither a run of refusals early nor a lucky run late
// decides alone. When the shedder's reading explains them blindEvidence
// better, and under half were let through (a key that shares a server
// with clients that take what it leaves is let through most of the time,
// at any pace it goes), the refusals are not about rate: the key gives
// its pace back, goes unpaced, and leaves the refusals to the retries,
// their backoff and the breaker, for blindHoldStart, then learns again,
// holding twice as long each time the refusals still prove blind. A run
// of blindHalf refusals, none let through, tells neither: a window that
// ran out refuses all until it turns.
//
// Meanwhile the search for a pace cuts no lower than an eighth of where
// it started until the bucket's reading wins by ratedEvidence (or
// measures take it lower), a floor that halves each time the test,
// blindHalf samples on, still cannot tell: a slower bucket is reached a
// few refusals later, and a server blind to the pace is told at a pace
// that answers soon.

const (
	// blindMin is how many answered requests the test needs at least;
	// past blindKeep, the older weigh half.
	blindMin  = 12
	blindKeep = 96
	// blindHalf is how many refusals in a row, none let through, make
	// the test wait, and how many samples apart the search's floor
	// halves while it cannot tell.
	blindHalf = 6
	// blindEvidence and ratedEvidence are how much likelier, in natural
	// log, one reading of the samples must make them than the other for
	// the test to take it: 20 times for blind, 100 times for a rate,
	// which lifts the search's floor and so costs the most when wrong.
	blindEvidence = 3.0
	ratedEvidence = 4.6
	// blindSlack is the least chance either reading gives an outcome: a
	// bucket refills unevenly, and a shedder may let all through a while.
	blindSlack = 0.05
	// rareLetThrough is the least chance a bucket's reading gives a
	// request let through: one sent far faster than its rate.
	rareLetThrough = 0.01
	// rateGrid and rateRefine are the steps of the search for the rate
	// that best explains the samples.
	rateGrid   = 16
	rateRefine = 8
	// blindHoldStart and blindHoldMax bound how long a key whose
	// refusals proved blind to its pace goes unpaced before it tries
	// again.
	blindHoldStart = 30 * time.Second
	blindHoldMax   = 10 * time.Minute
	// blindFloorDepth is how far below where it started the search for a
	// pace goes before the test has told a rate's refusals: a pace that
	// halves at each refusal would otherwise leave it too few answers, too
	// late, when the refusals are blind to it.
	blindFloorDepth = 8
)

// paceBin is the samples sent at paces within a quarter of an octave of
// each other: how many, how many let through, and the sum of their
// paces' logs. Counts are floats: old samples weigh less (blindKeep).
type paceBin struct {
	at      int // the bin's place: the pace's log2, in quarters, rounded down
	n, ok   float64
	sumLogs float64
	pace    float64 // the geometric mean pace of the bin's samples
}

// Samples are the answers to the requests a key sent at a learned pace,
// binned by that pace: what the blind test weighs. A Pacer keeps its
// own; a replica sharing a fleet's pace keeps those it sent, and tells
// the store the verdicts. The zero value is empty.
type Samples struct {
	bins         []paceBin
	weight       float64 // the samples' weight in all the bins
	refusedInRow int     // refusals in a row, last
	sampled      int     // samples taken so far
	floorLowered int     // sampled when the verdict last lowered the search's floor
}

// Verdict is what the blind test says of a key's refusals.
type Verdict uint8

const (
	// NoVerdict: nothing to do yet.
	NoVerdict Verdict = iota
	// VerdictBlind: the refusals proved blind to the pace.
	VerdictBlind
	// VerdictRated: they fell with the pace: the search's floor goes.
	VerdictRated
	// VerdictUndecided: the test cannot tell yet, the pace has not
	// varied enough: the search's floor gives way by half.
	VerdictUndecided
)

// Note notes the answer to a request sent at a learned pace.
func (s *Samples) Note(pace float64, ok bool) {
	if !(pace > 0) || math.IsInf(pace, 1) {
		return // sent at no pace: nothing to weigh
	}
	s.sampled++
	if ok {
		s.refusedInRow = 0
	} else {
		s.refusedInRow++
	}
	if s.weight >= blindKeep {
		// Old samples weigh half: a server's answers change with what
		// others take of it.
		for i := range s.bins {
			b := &s.bins[i]
			b.n, b.ok, b.sumLogs = b.n/2, b.ok/2, b.sumLogs/2
		}
		s.weight /= 2
	}
	at := int(math.Floor(4 * math.Log2(pace)))
	i := 0
	for i < len(s.bins) && s.bins[i].at != at {
		i++
	}
	if i == len(s.bins) {
		s.bins = append(s.bins, paceBin{at: at})
	}
	b := &s.bins[i]
	b.n++
	b.sumLogs += math.Log(pace)
	b.pace = math.Exp(b.sumLogs / b.n)
	if ok {
		b.ok++
	}
	s.weight++
}

// Reset forgets the samples: the key's pace was given back.
func (s *Samples) Reset() {
	s.bins, s.weight, s.refusedInRow = s.bins[:0], 0, 0
}

// Verdict is what the samples say at a new refusal; floored says the
// search for a pace still holds at its floor (see blindFloorDepth). trace,
// when set, sees the test.
func (s *Samples) Verdict(floored bool, trace func(format string, args ...any)) Verdict {
	if s.weight < blindMin {
		return NoVerdict
	}
	lean := s.test(trace)
	blind, rated := lean >= blindEvidence, -lean >= ratedEvidence
	switch {
	case rated:
		return VerdictRated
	case blind:
		return VerdictBlind
	case floored && s.sampled-s.floorLowered >= blindHalf:
		// Undecided: the pace has not varied enough for the readings to
		// differ. A floor the refusals keep the pace at gives
		// way by half each blindHalf samples, so that the spread grows
		// until the test can tell: a bucket far below the floor is found,
		// and a server blind to the pace is told as such.
		s.floorLowered = s.sampled
		return VerdictUndecided
	}
	return NoVerdict
}

// sample notes the answer to a request sent at a learned pace, with p.mu
// held.
func (p *Pacer) sample(pace float64, ok bool) { p.blinds.Note(pace, ok) }

// rateBlind reports whether the samples show the key's refusals blind to
// its pace, with p.mu held (Samples.Verdict), and lifts or lowers the
// search's floor as the verdict says.
func (p *Pacer) rateBlind() bool {
	switch p.blinds.Verdict(p.searchFloor > 0, p.trace) {
	case VerdictRated:
		p.searchFloor = 0 // a rate's refusals: the search may go lower
	case VerdictUndecided:
		p.searchFloor /= 2
	case VerdictBlind:
		return true
	}
	return false
}

// test weighs the samples: blind when a share let through whatever the
// pace explains them better than a bucket's rate, by blindEvidence; rated
// when the rate does, by ratedEvidence; neither when they cannot tell, as
// when the pace has not varied enough for the two to differ, or when the
// last blindHalf were all refused (a window that ran out, or others
// emptying the server, until it turns).
func (s *Samples) test(trace func(format string, args ...any)) (lean float64) {
	if s.refusedInRow >= blindHalf {
		return 0
	}
	share, shareFit := s.shareFit()
	rate, rateFit := s.rateFit()
	if trace != nil {
		trace("blind test: %.0f samples in %d bins; let through %.2f at any pace: %.2f; at most %.2f/s: %.2f",
			s.weight, len(s.bins), share, shareFit, rate, rateFit)
	}
	if share >= 0.5 {
		// A shedder refuses most of what comes; a share let through as
		// high is the key's share of a server others take from too.
		return math.Min(shareFit-rateFit, 0)
	}
	return shareFit - rateFit
}

// shareFit is the share of the samples let through, and the log-likelihood
// of their outcomes if each was let through with that chance, whatever its
// pace: a shedder's way.
func (s *Samples) shareFit() (share, fit float64) {
	var passed float64
	for _, b := range s.bins {
		passed += b.ok
	}
	share = passed / s.weight
	q := math.Min(math.Max(share, blindSlack), 1-blindSlack)
	return share, passed*math.Log(q) + (s.weight-passed)*math.Log(1-q)
}

// rateFit is the rate that best explains the samples as a bucket's, and
// the log-likelihood of their outcomes if so: a request sent at a pace p
// is let through with the chance rate/p, all of them below the rate (but
// for blindSlack: a bucket's refills do not come evenly, and
// rareLetThrough far above it). The likelihood is searched over a grid of
// rates from far below the slowest pace to the fastest, then refined
// around the best.
func (s *Samples) rateFit() (rate, fit float64) {
	lo, hi := math.Inf(1), 0.0
	for i := range s.bins {
		p := s.bins[i].pace
		lo, hi = math.Min(lo, p), math.Max(hi, p)
	}
	ll := func(x float64) float64 {
		r := math.Exp(x)
		var sum float64
		for i := range s.bins {
			b := &s.bins[i]
			p := math.Min(math.Max(r/b.pace, rareLetThrough), 1-blindSlack)
			sum += b.ok*math.Log(p) + (b.n-b.ok)*math.Log(1-p)
		}
		return sum
	}
	// In log space: from where every request would be refused but for
	// the slack, to where every one is let through.
	a, b := math.Log(lo*rareLetThrough), math.Log(hi)
	step := (b - a) / rateGrid
	best, fit := a, math.Inf(-1)
	for i := 0; i <= rateGrid; i++ {
		x := a + float64(i)*step
		if f := ll(x); f > fit {
			best, fit = x, f
		}
	}
	// A golden-section search within the cells beside the best.
	a, b = best-step, best+step
	m1, m2 := b-(b-a)/math.Phi, a+(b-a)/math.Phi
	f1, f2 := ll(m1), ll(m2)
	for range rateRefine {
		if f1 < f2 {
			a, m1, f1 = m1, m2, f2
			m2 = a + (b-a)/math.Phi
			f2 = ll(m2)
		} else {
			b, m2, f2 = m2, m1, f1
			m1 = b - (b-a)/math.Phi
			f1 = ll(m1)
		}
	}
	if f1 > fit {
		best, fit = m1, f1
	}
	if f2 > fit {
		best, fit = m2, f2
	}
	return math.Exp(best), fit
}

// goBlind gives the key's pace back, with p.mu held: its refusals proved
// blind to it. It goes unpaced until now plus the hold, which doubles
// each time.
func (p *Pacer) goBlind(now time.Time) {
	hold := p.blindHold.Start(now)
	if p.trace != nil {
		p.trace("%v blind: refusals do not fall with the pace; unpaced for %v",
			now.Sub(p.firstSend).Round(time.Millisecond), hold)
	}
	p.unpaced, p.probing, p.next = true, false, time.Time{}
	p.blinds.Reset()
	p.cutAt = p.sent
	p.freshOK = 0
}

// blind reports whether the key goes unpaced at now, its refusals blind
// to its pace; the refusals then teach nothing.
func (p *Pacer) blind(now time.Time) bool {
	return p.blindHold.Holds(now)
}
