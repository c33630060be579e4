package learn

import (
	"math"
	"time"
)

// This file is what a Pacer learns from a refusal that no count of the
// quota explains: a new event decreases the pace, or, two refusals far
// enough apart, measures the server between them; a refusal that comes
// however slowly the key goes is not about rate (blind.go).

// refused learns from a refusal no count explains, with p.mu held.
func (p *Pacer) refused(newEvent bool, hint time.Duration, now time.Time) {
	if p.blind(now) {
		return // left to the retries, their backoff and the breaker
	}
	if newEvent && p.rateBlind() {
		p.goBlind(now)
		return
	}
	p.lastHint = hint
	var target time.Time
	defer func() { p.lastEmpty, p.successesAtEmpty, p.lastTarget = now, p.successes, target }()
	if hint > 0 {
		target = now.Add(hint)
		if p.dryTarget.IsZero() || target.Before(p.dryTarget) {
			p.dryTarget = target
		}
	}
	if p.win != nil {
		if p.windowRefused(target, now) {
			return
		}
		p.notWindowed = true
		if p.measureAll(now) {
			return
		}
	}
	// Refused again and again, nothing let through for a while: the
	// server refills nothing, a window's way. (A refusal or two could be
	// other clients taking what it refilled, or a search that went too
	// fast.) A while is windowDrySpan, or less when the server let
	// requests through fast just before: as long as it took to let
	// windowDryIntervals of them through. A pause of more than a second
	// the server asks for is one too, until it shows otherwise.
	if p.dryFrom.IsZero() {
		p.dryFrom, p.dryShown, p.dryAnchor, p.dryPassed = now, p.refillShown(now), p.lastTarget, p.okRunBefore
	}
	if newEvent {
		p.dry++
	}
	dry := windowDry(p.dry, now.Sub(p.dryFrom), p.dryShown)
	switch {
	case !p.notWindowed && math.IsInf(p.told, 1) && (dry || hint > time.Second):
		p.becomeWindowed(p.dryTarget, now)
	case newEvent:
		p.decrease(hint, now)
	}
}

// refillShown is the rate the server let the key's requests through at
// between its last refusal and now, with p.mu held (refillRate); 0 when
// there was no refusal before.
func (p *Pacer) refillShown(now time.Time) float64 {
	if p.lastEmpty.IsZero() {
		return 0
	}
	return refillRate(p.successes-p.successesAtEmpty, now.Sub(p.lastEmpty))
}

// floorRate is the slowest a refusal cuts a pace to: one request a
// minute, or one per the refusal's hint, which says a request may pass
// after it. The hint is honoured for its request anyway: a pace slower
// than it would hold the key's requests longer than the server asked.
func floorRate(hint time.Duration) float64 {
	if hint <= 0 {
		return adaptiveMinRate
	}
	return math.Max(1/hint.Seconds(), adaptiveMinRate)
}

// decrease answers a new refusal, with p.mu held.
func (p *Pacer) decrease(hint time.Duration, now time.Time) {
	if p.trace != nil {
		defer func(before float64) {
			p.trace("%v decrease: rate %.1f -> %.1f (probing %v, climb %.1f->%.1f) successes %d in %v",
				now.Sub(p.firstSend).Round(time.Millisecond), before, p.rate(now), p.probing, p.rampFrom, p.rampTo,
				p.successes-p.successesAtEmpty, now.Sub(p.lastEmpty).Round(time.Millisecond))
		}(p.rate(now))
	}
	p.cutAt = p.sent
	defer func() { p.slack = false }() // a new span begins
	wasUnpaced := p.unpaced
	p.unpaced = false
	s := float64(p.successes - p.successesAtEmpty)
	switch span := now.Sub(p.lastEmpty); {
	case !wasUnpaced && !p.lastEmpty.IsZero() && span >= adaptiveMinSample && !p.slack && s >= 2:
		// A measure: between the two refusals the key kept the server
		// busy, and the server refilled what it let through, give or take
		// a token. Send at the low end, which it can always serve, and
		// climb to the high end. A span that began below the server's
		// rate measures it low: the pace that ran the server dry is above
		// it, and a cut of it is not far below.
		low := math.Max((s-1)/span.Seconds(), p.rate(now)*adaptiveCut)
		p.setMeasure(low, math.Max((s+1)/span.Seconds(), low), span, p.top())
	case wasUnpaced && !math.IsInf(p.top(), 1):
		// Refused under a ceiling, or a told limit: the server allows
		// less. Search from a cut below it, as from any start: halving at
		// each refusal, down to an eighth until the refusals show they
		// fall with the pace, and climbing back while requests succeed.
		p.search(p.cutTo(p.top(), adaptiveCut, hint), p.top())
	case wasUnpaced:
		// Nothing to measure yet: search, from high, halving at each
		// refusal and doubling while requests succeed, until a refusal
		// measures. A server that asks for long waits is searched from
		// lower: each refusal holds its request that long.
		start := float64(adaptiveProbeStart)
		if hint > time.Second {
			start = math.Max(adaptiveProbeStart/hint.Seconds(), adaptiveMinRate)
		}
		p.search(math.Min(start, p.ceiling), p.top())
	case p.probing:
		// Refused again too soon to measure: back off half, probe on.
		p.rampFrom, p.succeeding = p.floored(p.cutTo(p.rate(now), 0.5, hint)), 0
	default:
		r := p.floored(p.cutTo(p.rate(now), adaptiveCut, hint))
		p.setPace(r, r, 0, 0, p.top())
	}
	// The bucket is empty now: the first request at the new pace waits
	// its interval.
	p.next = now.Add(interval(p.rate(now)))
}

// measureAll paces, with p.mu held, by what the server let through since
// the key's first request, a measure of its long-run rate: for a key that
// turned out not to be windowed, whose holds kept it from a measure
// between two refusals. It reports false, changing nothing, when too
// little has passed to measure.
func (p *Pacer) measureAll(now time.Time) bool {
	span := now.Sub(p.firstSend)
	s := float64(p.successes) + float64(p.untrackedOK)
	if p.seedQuota > 0 {
		// The last window's quota over its length measures better: the
		// key was held, not refused, for much of the time since its start.
		s, span = float64(p.seedQuota), p.seedSpan
		p.seedQuota = 0
	} else if p.firstSend.IsZero() || span < adaptiveMinSample || s < 2 {
		return false
	}
	if p.trace != nil {
		p.trace("%v measured all: %.0f successes in %v", span.Round(time.Millisecond), s, span.Round(time.Millisecond))
	}
	low := (s - 1) / span.Seconds()
	p.unpaced, p.cutAt, p.slack = false, p.sent, false
	p.setMeasure(low, (s+1)/span.Seconds(), span, p.top())
	p.next = now.Add(interval(p.rate(now)))
	return true
}

// probeHold is how long a pace measured over span, at low requests a
// second, holds at the top of its measure before it probes beyond: the
// span, and long enough for adaptiveProbeAfter requests, but no more than
// adaptiveMaxHold. Each probe costs a refusal: the slower the server, the
// rarer they come.
func probeHold(span time.Duration, low float64) time.Duration {
	return min(max(span, time.Duration(adaptiveProbeAfter/low*float64(time.Second))), adaptiveMaxHold)
}
