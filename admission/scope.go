package admission

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/store"
)

// DefaultMaxQueue is how many requests of one key may wait in a scope
// whose Limit has a MaxWait and no MaxQueue: the ADR's 50 pending.
const DefaultMaxQueue = 50

// storeKeyPrefix starts the keys of the scopes' buckets in a Store, so
// that they are not a client transport's of the same name.
const storeKeyPrefix = "admission:"

// kind is what a scope limits by.
type kind uint8

const (
	kindNone   kind = iota // nothing: no Rate (or rate.Inf) and no Window
	kindBucket             // a token bucket: Rate and Burst
	kindWindow             // a fixed window: Burst per Window
)

// scope is a Limit at work in a Handler.
type scope struct {
	name     string
	key      ratewise.KeyFunc // nil: the client's IP
	applies  func(*http.Request) bool
	global   bool
	kind     kind
	rate     rate.Limit
	burst    int
	interval int64 // a bucket's nanoseconds per token
	tau      int64 // burst × interval
	window   int64 // a window's length in nanoseconds, and limit its turns
	limit    int64
	maxWait  time.Duration // 0: refuse at once
	maxQueue int32
	store    store.Buckets
	counter  store.BucketCounter // store, when it counts as it takes
	one      *entry              // a global scope's one entry
	keys     *keyMap

	// What the headers say of the scope, made once.
	policyItem string // `"ip";q=5;w=30`
	itemPrefix string // `"ip";r=`
	limitValue string // X-RateLimit-Limit
	jsonName   string // the name as a JSON string, quotes included

	stats     scopeStats
	storeDown atomic.Bool // the store failed last time it was asked
}

// view is what a scope says of a key in the headers: the whole turns
// left, and the time until the quota is whole again.
type view struct {
	remaining int64
	reset     int64 // nanoseconds
	ok        bool  // known
}

// newScope checks l for a Handler and makes its scope; n counts the
// limits from 1, for a default name.
func newScope(l ratewise.Limit, n int) (*scope, error) {
	if l.Name == "" {
		l.Name = fmt.Sprintf("limit %d", n)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: admission: Limit %q: "+format, append([]any{l.Name}, args...)...))
	}
	if err := l.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, c := range []byte(l.Name) {
		if c < 0x20 || c > 0x7e {
			bad("the name goes in the RateLimit headers as a string: use printable ASCII only")
			break
		}
	}
	if l.MinSpacing != 0 || l.SpacingJitter != 0 || l.MaxConcurrent != 0 || l.Reserve != 0 || l.Adaptive || l.StartRate != 0 || l.IdleTimeout != 0 {
		bad("a server scope is a token bucket (Rate, Burst) or a window (Burst, Window), waiting up to MaxWait with MaxQueue: it takes no MinSpacing (%v), SpacingJitter (%v), MaxConcurrent (%d), Reserve (%d), Adaptive (%v), StartRate (%v) or IdleTimeout (%v; a key is forgotten once its bucket is full or its window over)",
			l.MinSpacing, l.SpacingJitter, l.MaxConcurrent, l.Reserve, l.Adaptive, float64(l.StartRate), l.IdleTimeout)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &scope{
		name: l.Name, key: l.Key, applies: l.Applies, global: isGlobal(l.Key),
		rate: l.Rate, burst: max(l.Burst, ratewise.DefaultBurst), store: l.Store,
	}
	if !l.FailFast {
		s.maxWait = l.MaxWait
	}
	s.maxQueue = int32(min(l.MaxQueue, math.MaxInt32))
	if s.maxQueue == 0 {
		s.maxQueue = DefaultMaxQueue
	}
	var w time.Duration // the policy's window
	switch {
	case l.Window > 0:
		s.kind, s.window, s.limit = kindWindow, int64(l.Window), int64(l.Burst)
		w = l.Window
	case l.Rate > 0 && l.Rate != rate.Inf:
		s.kind = kindBucket
		s.interval = max(int64(math.Round(float64(time.Second)/float64(l.Rate))), 1)
		if int64(s.burst) > math.MaxInt64/s.interval {
			return nil, fmt.Errorf("ratewise: admission: Limit %q: a Burst of %d at a Rate of %v/s spans more time than a time.Duration holds", l.Name, s.burst, float64(l.Rate))
		}
		s.tau = int64(s.burst) * s.interval
		w = time.Duration(s.tau) // what an empty bucket takes to fill
	}
	if s.counter, _ = l.Store.(store.BucketCounter); s.kind != kindBucket {
		s.store, s.counter = nil, nil
	}
	if s.global {
		s.one = &entry{}
	} else {
		s.keys = newKeyMap()
	}
	name := strconv.Quote(l.Name) // printable ASCII: Go's quoting is a structured field string's
	s.policyItem = name + ";q=" + strconv.Itoa(s.quota()) + ";w=" + strconv.FormatInt(max(ceilSeconds(int64(w)), 1), 10)
	s.itemPrefix = name + ";r="
	s.limitValue = strconv.Itoa(s.quota())
	s.jsonName = name // the same quoting is valid JSON for printable ASCII
	s.stats.init()
	return s, nil
}

// isGlobal reports whether key is ratewise.Global, whose one state needs
// no map; funcs cannot be compared with ==.
func isGlobal(key ratewise.KeyFunc) bool {
	return key != nil && reflect.ValueOf(key).Pointer() == reflect.ValueOf(ratewise.Global).Pointer()
}

// quota is what the scope admits at once: a bucket's Burst, a window's
// turns.
func (s *scope) quota() int {
	if s.kind == kindWindow {
		return int(s.limit)
	}
	return s.burst
}

// storeKey is key's bucket in the scope's Store.
func (s *scope) storeKey(key string) string {
	if s.global {
		return storeKeyPrefix + s.name
	}
	return storeKeyPrefix + s.name + ":" + key
}

// entryFor returns key's entry, held until release.
func (s *scope) entryFor(key string, now int64) *entry {
	if s.global {
		return s.one
	}
	return s.keys.acquire(key, now, s)
}

// done lets the entry of t go.
func (s *scope) done(e *entry) {
	if !s.global {
		release(e)
	}
}

// turn is a turn a request took in one scope.
type turn struct {
	s      *scope
	e      *entry // the key's entry, held while the request is admitted
	key    string
	wait   int64 // until the turn comes, in nanoseconds
	slot   int64 // a window's turn
	shared bool  // the store holds the token
	tokens float64
	queued bool // counted among the key's waiters
}

// refusal is why a scope refused a request.
type refusal struct {
	reason reason
	s      *scope
	key    string
	wait   int64 // until the scope would admit it; 0 when unknown
	view   view
	err    error // the store's, for reasonStoreUnavailable
}

// take takes a turn of the scope for key at now: at once, or, for a scope
// with a MaxWait, one that comes within it and before deadline, the
// request's context's (−1 without one).
func (s *scope) take(ctx context.Context, h *Handler, key string, now int64, deadline int64) (turn, refusal) {
	t := turn{s: s, key: key, e: s.entryFor(key, now)}
	maxWait := int64(s.maxWait)
	if deadline >= 0 && maxWait > 0 {
		maxWait = min(maxWait, max(deadline-now-1, 0))
	}
	var (
		ok     bool
		viewed view
	)
	if s.store != nil {
		var err error
		ok, viewed, err = s.takeShared(ctx, h, &t, maxWait)
		switch {
		case err == nil:
		case errors.Is(err, ratewise.ErrStoreUnavailable):
			s.done(t.e)
			return turn{}, refusal{reason: reasonStoreUnavailable, s: s, key: key, err: err}
		case ctx.Err() != nil:
			s.done(t.e)
			return turn{}, refusal{reason: reasonCanceled, s: s, key: key, err: err}
		default:
			s.stats.fallbacks.Add(1)
			ok, viewed = s.takeLocal(&t, now, maxWait)
		}
	} else {
		ok, viewed = s.takeLocal(&t, now, maxWait)
	}
	if !ok {
		s.done(t.e)
		r := refusal{reason: reasonLimit, s: s, key: key, wait: t.wait, view: viewed}
		if s.maxWait > 0 {
			r.reason = reasonMaxWait
		}
		return turn{}, r
	}
	if t.wait > 0 {
		for {
			q := t.e.waiting.Load()
			if q >= s.maxQueue {
				s.giveBack(ctx, &t)
				v := s.viewAt(&t, now)
				if t.shared {
					v = s.sharedView(t.tokens + 1) // the one given back
				}
				s.done(t.e)
				return turn{}, refusal{reason: reasonMaxQueue, s: s, key: key, wait: t.wait, view: v}
			}
			if t.e.waiting.CompareAndSwap(q, q+1) {
				break
			}
		}
		t.queued = true
		s.stats.depth.Add(1)
	}
	return t, refusal{}
}

// takeLocal takes the turn in the scope's own bucket or window; on a
// refusal, viewed is the key's state for the headers.
func (s *scope) takeLocal(t *turn, now, maxWait int64) (ok bool, viewed view) {
	switch s.kind {
	case kindBucket:
		t.wait, ok = t.e.takeBucket(now, s.interval, s.tau, maxWait)
		if !ok {
			viewed = t.e.bucketView(now, s.interval, s.tau)
		}
	case kindWindow:
		t.wait, t.slot, ok = t.e.takeWindow(now, s.window, s.limit, maxWait)
		if !ok {
			viewed = t.e.windowView(now, s.window, s.limit)
		}
	}
	return ok, viewed
}

// takeShared takes the turn from the store. Its error is the store's,
// which the caller sorts out.
func (s *scope) takeShared(ctx context.Context, h *Handler, t *turn, maxWait int64) (ok bool, viewed view, err error) {
	key := s.storeKey(t.key)
	var wait time.Duration
	t.tokens = math.NaN()
	if s.counter != nil {
		wait, t.tokens, err = s.counter.TakeCounted(ctx, key, 1, s.rate, s.burst, time.Duration(maxWait))
	} else {
		wait, err = s.store.Take(ctx, key, 1, s.rate, s.burst, time.Duration(maxWait))
		if err == nil && h.headers&(HeaderRateLimit|HeaderXRateLimit) != 0 {
			if tokens, err := s.store.Tokens(ctx, key, s.rate, s.burst); err == nil {
				t.tokens = tokens
			}
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.storeFailed(h, err)
		}
		return false, view{}, err
	}
	s.storeAnswered(h)
	t.wait = int64(wait)
	if t.wait > maxWait {
		return false, s.sharedView(t.tokens), nil
	}
	t.shared = true
	return true, view{}, nil
}

// sharedView is what a store's bucket holding tokens says: the whole
// tokens, and the time until it is full.
func (s *scope) sharedView(tokens float64) view {
	if math.IsNaN(tokens) {
		return view{}
	}
	reset := (float64(s.burst) - tokens) / float64(s.rate) * float64(time.Second)
	return view{remaining: int64(max(math.Floor(tokens), 0)), reset: int64(max(math.Ceil(reset), 0)), ok: true}
}

// viewAt is what the scope says of t's key at now, once t was taken.
func (s *scope) viewAt(t *turn, now int64) view {
	switch {
	case t.shared:
		return s.sharedView(t.tokens)
	case s.kind == kindBucket:
		return t.e.bucketView(now, s.interval, s.tau)
	case s.kind == kindWindow:
		return t.e.windowView(now, s.window, s.limit)
	}
	return view{}
}

// peek is what the scope says of key at now without taking anything
// (nor making an entry): the wait until it would admit a request, and its
// view. A store's scope says nothing: asking would cost a round trip.
func (s *scope) peek(key string, now int64) (wait int64, v view) {
	if s.store != nil && !s.storeDown.Load() {
		return 0, view{}
	}
	e := s.one
	if !s.global {
		if e = s.keys.lookup(key); e == nil {
			return 0, s.viewAt(&turn{e: &entry{}}, now)
		}
	}
	switch s.kind {
	case kindBucket:
		return e.peekBucket(now, s.interval, s.tau), e.bucketView(now, s.interval, s.tau)
	case kindWindow:
		return e.peekWindow(now, s.window, s.limit), e.windowView(now, s.window, s.limit)
	}
	return 0, view{}
}

// giveBack gives t's turn back: the request will not go.
func (s *scope) giveBack(ctx context.Context, t *turn) {
	if t.queued {
		t.e.waiting.Add(-1)
		s.stats.depth.Add(-1)
		t.queued = false
	}
	switch {
	case t.shared:
		// Even when the client went away: the token is the next one's.
		if err := s.store.Give(context.WithoutCancel(ctx), s.storeKey(t.key), 1, s.rate, s.burst); err != nil {
			s.stats.lostGives.Add(1)
		}
	case s.kind == kindBucket:
		t.e.giveBackBucket(s.interval)
	case s.kind == kindWindow:
		t.e.giveBackWindow(t.slot)
	}
}

// dequeue takes an admitted turn out of the key's waiters.
func (s *scope) dequeue(t *turn) {
	if t.queued {
		t.e.waiting.Add(-1)
		s.stats.depth.Add(-1)
		t.queued = false
	}
}

// storeFailed notes a failure of the store: the first after an answer
// starts an outage, which is counted and logged once.
func (s *scope) storeFailed(h *Handler, err error) {
	if s.storeDown.Load() || !s.storeDown.CompareAndSwap(false, true) {
		return
	}
	s.stats.outages.Add(1)
	if h.logger != nil {
		policy := "fall back to this process's buckets"
		if errors.Is(err, ratewise.ErrStoreUnavailable) {
			policy = "refuse with 503"
		}
		h.logger.Warn("admission store unavailable", "event", "admission_store_down", "scope", s.name,
			"while_down", policy, "error", ratewise.Redact(err.Error(), nil))
	}
}

// storeAnswered notes an answer of the store, which ends an outage.
func (s *scope) storeAnswered(h *Handler) {
	if !s.storeDown.Load() || !s.storeDown.CompareAndSwap(true, false) {
		return
	}
	if h.logger != nil {
		h.logger.Info("admission store available again", "event", "admission_store_up", "scope", s.name)
	}
}

// ceilSeconds is d nanoseconds in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d int64) int64 {
	if d <= 0 {
		return 0
	}
	return (d-1)/int64(time.Second) + 1
}
