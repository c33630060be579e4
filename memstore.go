package ratewise

import (
	"context"
	"sync"
	"time"

	"github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// MemoryStore keeps shared state in this process's memory: a store.Store
// for transports of one process that share limits and trips, and the
// reference of what a store does (the ratewise/redis module does the same
// across processes). It is safe for concurrent use, and drops state that
// has nothing left to say as new keys come. The zero value is not usable:
// call NewMemoryStore.
type MemoryStore struct {
	mu       sync.Mutex
	buckets  map[string]*rate.Limiter
	pauses   map[string]time.Time
	breakers map[string]*memBreaker
	learned  map[string]*memLearned
	windows  map[string]*memWindow
	size     int    // entries at the last prune
	probes   uint64 // probes granted, to name each
}

// memBreaker is a breaker's shared state.
type memBreaker struct {
	failures   int
	gen        uint64      // failures ever counted while closed
	recent     []time.Time // failures within the window, for WindowFailures
	open       bool        // tripped and not closed since: open, then half-open
	until      time.Time   // when open, the end of the cooldown
	level      int
	since      time.Time     // the last trip, for the level's decay
	decay      time.Duration // the rules' Decay at that trip
	cause      store.Cause   // what tripped it at since
	closed     time.Time     // when a probe last closed it
	retrip     time.Duration // the rules' RetripWindow then
	probeUntil time.Time     // half-open: the probe granted holds until then
	probeID    uint64        // the probe granted
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{buckets: map[string]*rate.Limiter{}, pauses: map[string]time.Time{},
		breakers: map[string]*memBreaker{}, learned: map[string]*memLearned{}, windows: map[string]*memWindow{}}
}

// Take implements store.Buckets: n tokens now, or reserved within maxWait.
// n above burst never comes: Take returns a wait of about 292 years.
func (m *MemoryStore) Take(_ context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wait, _, _ := m.take(time.Now(), key, n, r, burst, maxWait)
	return wait, nil
}

// take is Take with m.mu held and the clock read: it also returns key's
// bucket, and the burst it was given (at least 1).
func (m *MemoryStore) take(now time.Time, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, *rate.Limiter, int) {
	burst = max(burst, 1)
	lim := m.bucketAt(key, r, burst, now)
	res := lim.ReserveN(now, n)
	wait := limit.TurnDelay(res.DelayFrom(now))
	if wait > max(maxWait, 0) {
		res.CancelAt(now) // too far: nothing taken
		return max(wait, time.Nanosecond), lim, burst
	}
	return wait, lim, burst
}

// Tokens implements store.Buckets. A bucket keeps the rate of its last
// Take until the next: Tokens reads it at that rate, within burst.
func (m *MemoryStore) Tokens(_ context.Context, key string, _ rate.Limit, burst int) (float64, error) {
	now := time.Now()
	burst = max(burst, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	lim := m.buckets[key]
	if lim == nil {
		return float64(burst), nil
	}
	return min(lim.TokensAt(now), float64(burst)), nil
}

// Pause implements store.Pauses.
func (m *MemoryStore) Pause(_ context.Context, key string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if until.After(m.pauses[key]) {
		m.pauses[key] = until
		m.prune(time.Now())
	}
	return nil
}

// PausedUntil implements store.Pauses.
func (m *MemoryStore) PausedUntil(_ context.Context, key string) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pauses[key], nil
}

// BreakerAdmit implements store.Breakers.
func (m *MemoryStore) BreakerAdmit(_ context.Context, key string, rules *store.Rules) (store.Breaker, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[key]
	if b == nil {
		return store.Breaker{State: store.Closed}, nil
	}
	// Closed, open, or half-open with another request probing.
	if s := b.state(now, rules); s.State != store.HalfOpen || now.Before(b.probeUntil) {
		return s, nil
	}
	m.probes++
	b.probeUntil, b.probeID = now.Add(rules.ProbeTimeout), m.probes
	return store.Breaker{State: store.HalfOpen, Level: b.level, Probe: true, ProbeID: b.probeID}, nil
}

// BreakerRead implements store.Breakers.
func (m *MemoryStore) BreakerRead(_ context.Context, key string, rules *store.Rules) (store.Breaker, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[key]
	if b == nil {
		return store.Breaker{State: store.Closed}, nil
	}
	sb := b.state(now, rules)
	sb.OpenedAt, sb.Cause = b.since, b.cause
	return sb, nil
}

// BreakerReleaseProbe implements store.Breakers.
func (m *MemoryStore) BreakerReleaseProbe(_ context.Context, key string, probeID uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.breakers[key]; b != nil && b.open && b.probeID == probeID {
		b.probeUntil = time.Time{}
	}
	return nil
}

// BreakerFailed implements store.Breakers.
func (m *MemoryStore) BreakerFailed(_ context.Context, key string, probe bool, cause store.Cause, rules *store.Rules) (store.Breaker, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breaker(key, now)
	switch {
	case b.open && now.Before(b.until):
		// Open already: a request sent before the trip counts nothing.
	case b.open && probe:
		b.trip(now, min(b.level+1, len(rules.Cooldowns)-1), cause, rules) // a failed probe: the next cooldown
	case !b.open:
		b.failures++
		b.gen++
		if rules.WindowFailures > 0 {
			b.recent = append(b.recent, now)
			for len(b.recent) > 0 && now.Sub(b.recent[0]) >= rules.Window {
				b.recent = b.recent[1:]
			}
		}
		if b.failures >= rules.ConsecutiveFailures || rules.WindowFailures > 0 && len(b.recent) >= rules.WindowFailures {
			level := b.levelAt(now, rules)
			if !b.closed.IsZero() && now.Sub(b.closed) < rules.RetripWindow {
				level++ // the trouble came back soon after it closed
			}
			b.trip(now, min(level, len(rules.Cooldowns)-1), cause, rules)
		}
	}
	return b.state(now, rules), nil
}

// BreakerSucceeded implements store.Breakers.
func (m *MemoryStore) BreakerSucceeded(_ context.Context, key string, probe bool, rules *store.Rules) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breakers[key]
	if b == nil {
		return nil
	}
	b.failures = 0
	if probe && b.open && !now.Before(b.until) {
		b.open, b.probeUntil = false, time.Time{} // the level stays, to decay
		b.closed, b.retrip = now, rules.RetripWindow
	}
	return nil
}

// BreakerTripped implements store.Breakers.
func (m *MemoryStore) BreakerTripped(_ context.Context, key string, trip store.Trip, rules *store.Rules) error {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.breaker(key, now)
	if b.open && !b.until.Before(trip.Until) {
		return nil
	}
	b.trip(now, max(min(trip.Level, len(rules.Cooldowns)-1), b.levelAt(now, rules)), trip.Cause, rules)
	b.until = trip.Until
	if !trip.OpenedAt.IsZero() {
		b.since = trip.OpenedAt
	}
	return nil
}

// succeededSince takes in a success told late, of a request admitted
// while key's breaker had counted gen-1 failures: the failures counted
// since are cleared, as BreakerSucceeded clears them.
func (m *MemoryStore) succeededSince(key string, gen uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b := m.breakers[key]; b != nil && !b.open && b.gen >= gen {
		b.failures = 0
	}
}

// breaker returns key's breaker, made on first use, with m.mu held.
func (m *MemoryStore) breaker(key string, now time.Time) *memBreaker {
	b := m.breakers[key]
	if b == nil {
		b = &memBreaker{}
		m.breakers[key] = b
		m.prune(now)
	}
	return b
}

func (b *memBreaker) trip(now time.Time, level int, cause store.Cause, rules *store.Rules) {
	b.open, b.level, b.since, b.decay, b.cause = true, level, now, rules.Decay, cause
	b.until = now.Add(rules.Cooldowns[level])
	b.failures, b.recent, b.probeUntil = 0, nil, time.Time{}
}

// levelAt is the escalation level after the Decays since the last trip.
func (b *memBreaker) levelAt(now time.Time, rules *store.Rules) int {
	decay := b.decay
	if rules != nil {
		decay = rules.Decay
	}
	return breaker.DecayedLevel(b.level, b.since, now, decay)
}

// state is what b tells a transport: its level decayed while closed.
func (b *memBreaker) state(now time.Time, rules *store.Rules) store.Breaker {
	switch {
	case !b.open:
		return store.Breaker{State: store.Closed, Level: b.levelAt(now, rules), Failures: b.failures, Gen: b.gen}
	case now.Before(b.until):
		return store.Breaker{State: store.Open, Until: b.until, Level: b.level}
	}
	return store.Breaker{State: store.HalfOpen, Level: b.level}
}

// prune drops, once the store has doubled since it last did, what has
// nothing left to say; with m.mu held.
func (m *MemoryStore) prune(now time.Time) {
	size := len(m.buckets) + len(m.pauses) + len(m.breakers) + len(m.learned) + len(m.windows)
	if size < 2*max(m.size, 64) {
		return
	}
	for k, lim := range m.buckets {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(m.buckets, k)
		}
	}
	for k, until := range m.pauses {
		if !now.Before(until) {
			delete(m.pauses, k)
		}
	}
	for k, b := range m.breakers {
		if !b.open && b.failures == 0 && b.levelAt(now, nil) == 0 && now.Sub(b.closed) >= b.retrip {
			delete(m.breakers, k)
		}
	}
	for k, l := range m.learned {
		if now.Sub(l.used) >= DefaultIdleTimeout {
			delete(m.learned, k)
		}
	}
	for k, w := range m.windows {
		if w.Idle(now, w.window) {
			delete(m.windows, k)
		}
	}
	m.size = len(m.buckets) + len(m.pauses) + len(m.breakers) + len(m.learned) + len(m.windows)
}

// bucketAt returns key's bucket, made on first use or set to r and burst
// when they changed, with m.mu held.
func (m *MemoryStore) bucketAt(key string, r rate.Limit, burst int, now time.Time) *rate.Limiter {
	lim := m.buckets[key]
	if lim == nil {
		lim = rate.NewLimiter(r, burst)
		m.buckets[key] = lim
		m.prune(now)
	} else if lim.Limit() != r || lim.Burst() != burst {
		lim.SetLimitAt(now, r)
		lim.SetBurstAt(now, burst)
	}
	return lim
}

var _ store.Admitter = (*MemoryStore)(nil)

// Admit implements store.Admitter: BreakerAdmit, PausedUntil, Take and
// Learn, one after the other, the tokens and the turn taken only when the
// request may go now.
// (The MemoryStore is the reference of what Admit answers; each step
// holds its lock alone, which one process can afford.)
func (m *MemoryStore) Admit(ctx context.Context, ask *store.AdmitAsk) (store.AdmitAnswer, error) {
	var a store.AdmitAnswer
	goes := true
	if ask.Breaker != "" {
		if ask.Succeeded > 0 {
			m.succeededSince(ask.Breaker, ask.Succeeded)
		}
		sb, err := m.BreakerAdmit(ctx, ask.Breaker, ask.Rules)
		if err != nil {
			return store.AdmitAnswer{}, err
		}
		a.Breaker, goes = sb, sb.State == store.Closed || sb.Probe
	}
	if ask.Pause != "" {
		until, err := m.PausedUntil(ctx, ask.Pause)
		if err != nil {
			return store.AdmitAnswer{}, err
		}
		a.PausedUntil, goes = until, goes && !until.After(time.Now())
	}
	if ask.Bucket != "" && goes {
		wait, err := m.Take(ctx, ask.Bucket, max(ask.N, 1), ask.Rate, ask.Burst, 0)
		if err != nil {
			return store.AdmitAnswer{}, err
		}
		a.Took, a.Wait, goes = true, wait, wait <= 0
	}
	if ask.Learned != "" && goes {
		learned, err := m.Learn(ctx, ask.Learned, &ask.Learn)
		if err != nil {
			return store.AdmitAnswer{}, err
		}
		a.Learnt, a.Learned = true, learned
	}
	return a, nil
}

// This file is the MemoryStore's store.Windows: the reference of a told
// window a fleet shares, which ratewise/redis keeps in a sorted set.

var _ store.Windows = (*MemoryStore)(nil)

// memWindow is a key's window log, and the window it was last taken
// under, to tell when it is idle.
type memWindow struct {
	limit.WindowLog
	window time.Duration
}

// TakeWindow implements store.Windows.
func (m *MemoryStore) TakeWindow(_ context.Context, key string, limit int, window, maxWait time.Duration) (time.Duration, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.windows[key]
	if w == nil {
		w = &memWindow{}
		m.windows[key] = w
		m.prune(now)
	}
	w.window = window
	wait, took := w.Take(now, max(limit, 1), window, maxWait)
	if !took {
		return max(wait, time.Nanosecond), nil
	}
	return wait, nil
}

// What follows is the MemoryStore's store.Learned: the reference of what a
// fleet's shared learned pace does, which ratewise/redis does in a script.

var _ store.Learned = (*MemoryStore)(nil)

// memLearned is a key's learned state, and when it was last asked: a key
// idle for DefaultIdleTimeout is forgotten, as a transport forgets it.
type memLearned struct {
	learn.Shared
	used time.Time
}

// Learn implements store.Learned. A key that has learned nothing keeps
// no state: asking for its turn writes nothing.
func (m *MemoryStore) Learn(_ context.Context, key string, ask *store.LearnAsk) (store.LearnAnswer, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.learned[key]
	if l == nil {
		if !teaches(ask) {
			return store.LearnAnswer{}, nil
		}
		l = &memLearned{}
		m.learned[key] = l
		m.prune(now)
	}
	l.used = now
	return l.Learn(now, ask), nil
}

// teaches reports whether ask's outcomes may teach a key that learned
// nothing: a refusal may, and a count of the server's quota.
func teaches(ask *store.LearnAsk) bool {
	for _, o := range ask.Outcomes {
		if o.Kind == store.Refused || o.Counted {
			return true
		}
	}
	return false
}

var _ store.BucketCounter = (*MemoryStore)(nil)

// TakeCounted implements store.BucketCounter.
func (m *MemoryStore) TakeCounted(_ context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	wait, lim, burst := m.take(now, key, n, r, burst, maxWait)
	return wait, min(lim.TokensAt(now), float64(burst)), nil
}

// Give implements store.Buckets.
func (m *MemoryStore) Give(_ context.Context, key string, n int, _ rate.Limit, _ int) error {
	if n <= 0 {
		return nil
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if lim := m.buckets[key]; lim != nil {
		// A negative n adds tokens: the limiter takes n from what it holds
		// now, and caps what it holds at its burst whenever it reads it.
		lim.AllowN(now, -n)
	}
	return nil
}
