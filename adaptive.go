package ratewise

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// This file is the adaptive pacer of a Limit with Adaptive set: it learns
// each key's sending rate from the server instead of being told it.
//
// The server is taken for a token bucket: a refill rate R and a burst.
// Every refusal says the bucket was empty at that moment; between two
// refusals t1 and t2, the successes S it let through are what it refilled,
// R·(t2−t1), give or take the one token it may have held. So S/(t2−t1)
// measures R within 1/(t2−t1), without being told anything. The pacer
// sends at the lower end of that measure, which the server can always
// serve, climbs towards the upper end and then slowly beyond, and measures
// again at the next refusal: each measure is longer, so each is closer.
//
// Before its first refusal a key sends unpaced, but with a slow start: a
// window of requests in flight that grows with each success, so that the
// first refusal finds few requests on their way. A refusal of a request
// sent before the last decrease is a sibling of the event that caused it,
// and does not decrease the rate again.

// Tuning of the adaptive pacer.
const (
	// adaptiveStartWindow and adaptiveWindowGrowth make the slow start:
	// requests in flight at first, and the growth per success.
	adaptiveStartWindow  = 2
	adaptiveWindowGrowth = 0.25
	// adaptiveMinSample is the shortest span between refusals worth a
	// measure; shorter ones hold more error than signal.
	adaptiveMinSample = 100 * time.Millisecond
	// adaptiveProbeGrowth doubles the rate this often while no measure
	// has been made yet, so that the next refusal comes soon.
	adaptiveProbeGrowth = 100 * time.Millisecond
	// adaptiveRamp is how long the rate takes to climb from the low end of
	// a measure to its high end.
	adaptiveRamp = time.Second
	// adaptiveCreep is the growth per second beyond the measure, which
	// finds a server that has raised its limit.
	adaptiveCreep = 0.02
	// adaptiveCut is the multiplicative decrease when a refusal comes too
	// soon after the last to measure anything.
	adaptiveCut = 0.7
)

// adaptiveState is what an adaptive scope has learned of one key.
type adaptiveState struct {
	mu      sync.Mutex
	ceiling float64 // the Limit's Rate, or +Inf

	// Before the first refusal: the slow start.
	slowStart bool
	window    float64       // requests allowed in flight
	inFlight  int           // requests sent and not answered
	changed   chan struct{} // closed, and replaced, when inFlight drops or window grows

	// The pace: rate(t) climbs from rampFrom at rampStart to rampTo at
	// rampEnd, then grows by creep a second; probing doubles it instead.
	probing            bool
	rampFrom, rampTo   float64
	rampStart, rampEnd time.Time
	next               time.Time // when the next request may start
	gen                uint64    // decreases so far
	successes          int64
	lastRefusal        time.Time
	successesAtRefusal int64
	firstSend          time.Time
}

func newAdaptiveState(start, ceiling float64) *adaptiveState {
	a := &adaptiveState{ceiling: ceiling, changed: make(chan struct{})}
	if start > 0 && !math.IsInf(start, 1) {
		a.setPace(time.Time{}, start, start)
	} else {
		a.slowStart, a.window = true, adaptiveStartWindow
	}
	return a
}

// rate is the pace at now, in requests a second; +Inf while unpaced.
func (a *adaptiveState) rate(now time.Time) float64 {
	if a.slowStart {
		return math.Inf(1)
	}
	var r float64
	switch {
	case a.probing:
		doublings := now.Sub(a.rampStart).Seconds() / adaptiveProbeGrowth.Seconds()
		r = a.rampFrom * math.Pow(2, doublings)
	case now.Before(a.rampEnd):
		f := now.Sub(a.rampStart).Seconds() / a.rampEnd.Sub(a.rampStart).Seconds()
		r = a.rampFrom + (a.rampTo-a.rampFrom)*f
	default:
		r = a.rampTo * (1 + adaptiveCreep*now.Sub(a.rampEnd).Seconds())
	}
	return math.Min(r, a.ceiling)
}

// setPace starts a climb from 'from' to 'to' at now.
func (a *adaptiveState) setPace(now time.Time, from, to float64) {
	a.probing = false
	a.rampFrom, a.rampTo = math.Min(from, a.ceiling), math.Min(to, a.ceiling)
	a.rampStart, a.rampEnd = now, now.Add(adaptiveRamp)
}

// reserve takes the request's place in the pace: how long until it may
// go, and the generation of the pace it was placed in. In the slow start
// there is no wait, but room in the window: with none, ready is closed
// when there may be some; with room, the request is committed at once.
func (a *adaptiveState) reserve(now time.Time) (delay time.Duration, gen uint64, ready <-chan struct{}, committed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.firstSend.IsZero() {
		a.firstSend = now
	}
	if a.slowStart {
		if float64(a.inFlight) >= a.window {
			return 0, a.gen, a.changed, false
		}
		a.inFlight++
		return 0, a.gen, nil, true
	}
	start := now
	if a.next.After(now) {
		start = a.next
	}
	a.next = start.Add(a.interval(start))
	return start.Sub(now), a.gen, nil, false
}

// commit sends a request whose place came up, unless the pace was cut
// since it was placed: then it must take a new place in the slower pace.
func (a *adaptiveState) commit(gen uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if gen != a.gen {
		return false
	}
	a.inFlight++
	return true
}

// interval is the time between two requests at the pace at now, with a.mu
// held.
func (a *adaptiveState) interval(now time.Time) time.Duration {
	return time.Duration(float64(time.Second) / a.rate(now))
}

// cancel withdraws a turn whose request will not be sent.
func (a *adaptiveState) cancel() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
}

// settle ends a request in flight, with a.mu held.
func (a *adaptiveState) settle() {
	a.inFlight = max(a.inFlight-1, 0)
	close(a.changed)
	a.changed = make(chan struct{})
}

// outcome learns from a request's answer: a success grows the slow start's
// window, a refusal measures the server and, unless it is a sibling of the
// last decrease, decreases the pace.
func (a *adaptiveState) outcome(gen uint64, refused, ok bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.settle()
	switch {
	case ok:
		a.successes++
		if a.slowStart {
			a.window += adaptiveWindowGrowth
		}
	case refused:
		if gen == a.gen {
			a.decrease(now)
		}
		a.lastRefusal, a.successesAtRefusal = now, a.successes
	}
}

// adaptiveTrace, set by tests, sees every decision of the pacer.
var adaptiveTrace func(format string, args ...any)

// decrease is the answer to a new refusal event, with a.mu held.
func (a *adaptiveState) decrease(now time.Time) {
	if adaptiveTrace != nil {
		defer func(before float64) {
			adaptiveTrace("%v decrease: rate %.1f -> %.1f (probing %v, ramp %.1f->%.1f) successes %d since refusal %v",
				now.Sub(a.firstSend).Round(time.Millisecond), before, a.rate(now), a.probing, a.rampFrom, a.rampTo,
				a.successes-a.successesAtRefusal, now.Sub(a.lastRefusal).Round(time.Millisecond))
		}(a.rate(now))
	}
	a.gen++
	wasSlowStart := a.slowStart
	a.slowStart = false
	if span := now.Sub(a.lastRefusal); !a.lastRefusal.IsZero() && span >= adaptiveMinSample {
		// A measure: between the two refusals the server refilled what it
		// let through, give or take a token. Send at the low end, which it
		// can always serve, and climb to the high end.
		s := float64(a.successes - a.successesAtRefusal)
		a.setPace(now, math.Max(s-1, 1)/span.Seconds(), (s+1)/span.Seconds())
	} else if wasSlowStart {
		// Nothing to measure yet: start from what went through in the
		// first second or so, and double until a refusal measures.
		elapsed := math.Max(now.Sub(a.firstSend).Seconds(), 1)
		a.probing = true
		a.rampFrom = math.Max(float64(a.successes)/elapsed, 1)
		a.rampStart = now
	} else if a.probing {
		// Refused again too soon to measure: back off half, probe on.
		a.rampFrom, a.rampStart = math.Max(a.rate(now)/2, 1), now
	} else {
		r := a.rate(now) * adaptiveCut
		a.setPace(now, r, r)
	}
	// The bucket is empty now: the first request at the new pace waits
	// its interval.
	a.next = now.Add(a.interval(now))
}

// adaptiveTicket is a request admitted by an adaptive scope, whose answer
// the scope awaits.
type adaptiveTicket struct {
	scope *scope
	entry *keyedEntry[scopeState]
	gen   uint64
}

// finish tells the scope how the request went and releases its entry.
func (t adaptiveTicket) finish(resp *http.Response, err error, class Class, now time.Time) {
	a := t.entry.state.adapt
	refused := err == nil && class == RateLimited
	ok := err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299
	a.outcome(t.gen, refused, ok, now)
	t.scope.states.release(t.entry)
}

// cancel withdraws a request that will not be sent.
func (t adaptiveTicket) cancel() {
	t.entry.state.adapt.cancel()
	t.scope.states.release(t.entry)
}

// adaptiveTickets are the tickets an attempt holds, one per adaptive
// scope; two fit inline, as heldSlots do.
type adaptiveTickets struct {
	inline [2]adaptiveTicket
	n      int
	more   []adaptiveTicket
}

func (ts *adaptiveTickets) add(t adaptiveTicket) {
	if ts.n < len(ts.inline) {
		ts.inline[ts.n] = t
	} else {
		ts.more = append(ts.more, t)
	}
	ts.n++
}

// each calls f for every ticket, then forgets them.
func (ts *adaptiveTickets) each(f func(adaptiveTicket)) {
	for i := range min(ts.n, len(ts.inline)) {
		f(ts.inline[i])
	}
	for _, t := range ts.more {
		f(t)
	}
	*ts = adaptiveTickets{}
}

// admitAdaptive waits for the request's turn in an adaptive scope: room
// in the slow start, or its place in the pace. It returns the pace's
// generation the request goes in.
func (s *scope) admitAdaptive(c *call, key string, st *scopeState, deadline time.Time) (uint64, error) {
	a := st.adapt
	for {
		now := time.Now()
		delay, gen, ready, committed := a.reserve(now)
		switch {
		case committed:
			return gen, nil
		case ready != nil:
			if err := c.waitUntil(ready, deadline); err != nil {
				if !deadline.IsZero() && !time.Now().Before(deadline) && c.ctx.Err() == nil {
					return 0, &LimitError{Scope: s.Name, Key: key, Reason: "max-wait"}
				}
				return 0, err
			}
			continue
		}
		st.mu.Lock()
		err := s.mayWait(st, key, delay, now, deadline)
		if err == nil {
			st.waiting++
		}
		st.mu.Unlock()
		if err != nil {
			return 0, err
		}
		err = c.waitAdmission(delay, WaitPacing)
		st.mu.Lock()
		st.waiting--
		st.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if a.commit(gen) {
			return gen, nil
		}
		// The pace was cut while the request waited: take a new place.
	}
}
