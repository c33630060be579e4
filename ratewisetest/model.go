package ratewisetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// This file holds the limit models and the bucket ones; window.go holds
// the window ones.

// Model is how a fake server counts requests: the kinds of limit real
// servers keep. The zero value is TokenBucket.
type Model int

const (
	// TokenBucket admits a request when its bucket of Config.Burst tokens,
	// refilled at Config.Rate per second, holds one, and takes it. A
	// refused request takes nothing. GCRA is the same admission rule.
	TokenBucket Model = iota
	// LeakyBucket is nginx's limit_req: each request adds one to an
	// excess that drains at Config.Rate per second, and a request that
	// would lift the excess above Config.Burst is refused at once, costing
	// nothing. Without Config.NoDelay an admitted request waits in the
	// server for excess/Rate before it is answered, so answers leave at
	// Rate and at most Burst wait at a time; with NoDelay it is answered
	// at once, so Burst+1 pass at once and then one per 1/Rate. A request
	// abandoned while it waits keeps its place in the excess, as in nginx.
	LeakyBucket
	// FixedWindow admits at most Config.Limit requests per Config.Window,
	// in windows aligned to the clock: window k covers Unix time
	// [k*Window, (k+1)*Window). A refused request is not counted.
	FixedWindow
	// FixedWindowFromFirst admits at most Config.Limit requests per
	// Config.Window, in windows that open at a key's first request and
	// last Window; the next opens at the first request after that. A
	// refused request is not counted.
	FixedWindowFromFirst
	// SlidingWindow is the sliding-window counter most middlewares keep:
	// it counts requests in clock-aligned windows of Config.Window, and
	// weighs the previous window's count by the share of it still inside
	// the last Window: count = previous × (Window − elapsed)/Window +
	// current. A request is refused when count >= Config.Limit, and a
	// refused request is not counted.
	SlidingWindow
	// ConcurrencyCap serves at most Config.Limit requests of a key at
	// once, as go-chi's Throttle and nginx's limit_conn do: a request that
	// finds every place taken is refused at once, and an admitted one
	// holds its place for Config.ServiceTime and the handler's run, until
	// it is answered. It meters no quota over time, so its refusals send
	// no rate-limit header, and Retry-After only when
	// Config.RefusalRetryAfter asks for one.
	ConcurrencyCap
	// LoadShed refuses a share Config.Shed of the requests whatever their
	// rate, as an overloaded server shedding load does: each request is
	// refused with that probability, drawn from a random stream that
	// Config.Seed seeds, so that a run repeats. Like ConcurrencyCap it
	// meters no quota: no rate-limit header, and Retry-After only when
	// Config.RefusalRetryAfter asks for one.
	LoadShed
)

// String returns the constant's name, such as "TokenBucket".
func (m Model) String() string {
	switch m {
	case TokenBucket:
		return "TokenBucket"
	case LeakyBucket:
		return "LeakyBucket"
	case FixedWindow:
		return "FixedWindow"
	case FixedWindowFromFirst:
		return "FixedWindowFromFirst"
	case SlidingWindow:
		return "SlidingWindow"
	case ConcurrencyCap:
		return "ConcurrencyCap"
	case LoadShed:
		return "LoadShed"
	}
	return fmt.Sprintf("Model(%d)", int(m))
}

func (m Model) valid() bool {
	return m >= TokenBucket && m <= LoadShed
}

// windowed reports whether m counts per window rather than keeping a
// bucket.
func (m Model) windowed() bool {
	return m >= FixedWindow && m <= SlidingWindow
}

// metered reports whether m meters a quota over time, a bucket or a
// window, whose state the rate-limit headers describe and whose refusals
// know when a request would pass. ConcurrencyCap and LoadShed meter none.
func (m Model) metered() bool {
	return m <= SlidingWindow
}

// check appends to bad what is wrong with the fields of c that m reads
// or ignores, and returns it.
func (m Model) check(c Config, bad []string) []string {
	switch {
	case m.windowed():
		if c.Limit <= 0 {
			bad = append(bad, fmt.Sprintf("Limit is %d; %v needs a positive Limit", c.Limit, m))
		}
		if c.Window <= 0 {
			bad = append(bad, fmt.Sprintf("Window is %v; %v needs a positive Window", c.Window, m))
		}
		if c.Rate > 0 {
			bad = append(bad, fmt.Sprintf("Rate is %v but %v counts Limit per Window; use Rate with TokenBucket or LeakyBucket", c.Rate, m))
		}
		if c.Burst > 0 {
			bad = append(bad, fmt.Sprintf("Burst is %d but %v counts Limit per Window; use Burst with TokenBucket or LeakyBucket", c.Burst, m))
		}
	case m.metered():
		if c.Limit != 0 {
			bad = append(bad, fmt.Sprintf("Limit is %d but %v keeps a bucket; use Limit with a window model or ConcurrencyCap, or Rate and Burst", c.Limit, m))
		}
		if c.Window != 0 {
			bad = append(bad, fmt.Sprintf("Window is %v but %v keeps a bucket; use Window with a window model", c.Window, m))
		}
	default:
		bad = m.checkUnmetered(c, bad)
	}
	if !m.windowed() && c.RetryAfter == RetryAfterWindow {
		bad = append(bad, fmt.Sprintf("RetryAfter is RetryAfterWindow but %v has no Window; use it with a window model", m))
	}
	if m == LeakyBucket && !(c.Rate > 0) {
		bad = append(bad, fmt.Sprintf("Rate is %v but LeakyBucket needs a positive Rate", c.Rate))
	}
	if c.NoDelay && m != LeakyBucket {
		bad = append(bad, fmt.Sprintf("NoDelay is set but Model is %v; NoDelay is for LeakyBucket only", m))
	}
	if c.Shed != 0 && m != LoadShed {
		bad = append(bad, fmt.Sprintf("Shed is %v but Model is %v; Shed is for LoadShed only", c.Shed, m))
	}
	if c.RefusalRetryAfter != 0 && m.metered() {
		bad = append(bad, fmt.Sprintf("RefusalRetryAfter is %v but %v names the wait its count gives; RefusalRetryAfter is for ConcurrencyCap and LoadShed only", c.RefusalRetryAfter, m))
	}
	return bad
}

// checkUnmetered is check for ConcurrencyCap and LoadShed, which take no
// rate, burst nor window, and send no rate-limit header.
func (m Model) checkUnmetered(c Config, bad []string) []string {
	if m == ConcurrencyCap && c.Limit <= 0 {
		bad = append(bad, fmt.Sprintf("Limit is %d; ConcurrencyCap needs a positive Limit, the requests it serves at once", c.Limit))
	}
	if m == LoadShed && c.Limit != 0 {
		bad = append(bad, fmt.Sprintf("Limit is %d but LoadShed keeps no count; use Shed for the share of requests it refuses", c.Limit))
	}
	if c.Rate != 0 {
		bad = append(bad, fmt.Sprintf("Rate is %v but %v keeps no bucket; use Rate with TokenBucket or LeakyBucket", c.Rate, m))
	}
	if c.Burst != 0 {
		bad = append(bad, fmt.Sprintf("Burst is %d but %v keeps no bucket; use Burst with TokenBucket or LeakyBucket", c.Burst, m))
	}
	if c.Window != 0 {
		bad = append(bad, fmt.Sprintf("Window is %v but %v keeps no window; use Window with a window model", c.Window, m))
	}
	if c.PublishHeaders {
		bad = append(bad, fmt.Sprintf("PublishHeaders is set but %v meters no quota for X-RateLimit-* to describe; leave it off", m))
	}
	if c.IETFHeaders {
		bad = append(bad, fmt.Sprintf("IETFHeaders is set but %v meters no quota for RateLimit to describe; leave it off", m))
	}
	return bad
}

// verdict is what a model said about one request.
type verdict struct {
	admitted  bool
	remaining int           // requests the model would still admit now
	untilOne  time.Duration // until the model would admit one request
	reset     time.Duration // until a bucket is full or a window ends
	delay     time.Duration // how long an admitted request waits in the server
}

// keyLimit is the limit state of one key. Its caller serializes calls.
type keyLimit interface {
	// take decides on one request arriving at now, counting it when it
	// is admitted.
	take(now time.Time) verdict
}

// newKeyLimit returns the function that makes the state of a new key for
// cfg, which Validate accepts and which keeps a limit.
func newKeyLimit(cfg Config) func() keyLimit {
	switch cfg.Model {
	case LeakyBucket:
		size := cfg.Burst + 1
		return func() keyLimit {
			return &tokenBucket{lim: rate.NewLimiter(rate.Limit(cfg.Rate), size), rate: cfg.Rate, size: size, queue: !cfg.NoDelay}
		}
	case FixedWindow, FixedWindowFromFirst:
		return func() keyLimit {
			return &fixedWindow{limit: cfg.Limit, window: cfg.Window, fromFirst: cfg.Model == FixedWindowFromFirst}
		}
	case SlidingWindow:
		return func() keyLimit { return &slidingWindow{limit: cfg.Limit, window: cfg.Window} }
	case ConcurrencyCap:
		return func() keyLimit { return &places{limit: cfg.Limit} }
	case LoadShed:
		// One stream for every key: a share of all the requests.
		draws := rand.New(rand.NewPCG(cfg.seed(), shedStream))
		return func() keyLimit { return &shedder{share: cfg.Shed, draws: draws} }
	}
	size := cfg.burst()
	return func() keyLimit {
		return &tokenBucket{lim: rate.NewLimiter(rate.Limit(cfg.Rate), size), rate: cfg.Rate, size: size}
	}
}

// quota returns, for a metered model, what X-RateLimit-Limit and the policy's q say for cfg:
// the window's Limit, the token bucket's size, a leaky bucket's queue
// (Burst) or, with NoDelay, what passes at once (Burst+1).
func quota(cfg Config) int {
	switch {
	case cfg.Model.windowed():
		return cfg.Limit
	case cfg.Model == LeakyBucket && cfg.NoDelay:
		return cfg.Burst + 1
	case cfg.Model == LeakyBucket:
		return cfg.Burst
	}
	return cfg.burst()
}

// policy returns the RateLimit-Policy value for cfg, of a metered model: its quota, and as
// window the Window or the time an empty bucket takes to fill, in whole
// seconds, at least 1.
func policy(cfg Config) string {
	var w time.Duration
	switch cfg.Model {
	case TokenBucket:
		w = fromSeconds(float64(cfg.burst()) / cfg.Rate)
	case LeakyBucket:
		w = fromSeconds(float64(cfg.Burst+1) / cfg.Rate)
	default:
		w = cfg.Window
	}
	return `"default";q=` + strconv.Itoa(quota(cfg)) + ";w=" + strconv.FormatInt(max(fakehttp.CeilSeconds(w), 1), 10)
}

// tokenBucket is the state of TokenBucket and, one token larger than
// Burst, of LeakyBucket: nginx's excess is how far the bucket is below
// Burst tokens.
type tokenBucket struct {
	lim   *rate.Limiter
	rate  float64
	size  int
	queue bool // the admitted wait for their turn: LeakyBucket without NoDelay
}

func (b *tokenBucket) take(now time.Time) verdict {
	// AllowN takes nothing when it refuses, so a refusal costs no token.
	ok := b.lim.AllowN(now, 1)
	tokens := b.lim.TokensAt(now)
	v := bucketState(tokens, b.rate, b.size)
	v.admitted = ok
	if ok && b.queue {
		v.delay = fromSeconds(max(float64(b.size-1)-tokens, 0) / b.rate)
	}
	return v
}

// bucketState describes a bucket holding tokens, refilled at perSecond up
// to size.
func bucketState(tokens, perSecond float64, size int) verdict {
	tokens = max(tokens, 0)
	v := verdict{remaining: int(math.Floor(tokens))}
	if tokens < 1 {
		v.untilOne = fromSeconds((1 - tokens) / perSecond)
	}
	if b := float64(size); tokens < b {
		v.reset = fromSeconds((b - tokens) / perSecond)
	}
	return v
}

// Ideal returns the least time calls requests take against the limit c
// describes, from the first request's arrival to the last one's answer, for
// a client that sends each request the moment the limit admits it: the
// yardstick of a client's pacing. It returns 0 for a Config that Validate
// refuses. See "Ideal times" in the package doc for each model's formula.
func (c Config) Ideal(calls int) time.Duration {
	if calls <= 0 || c.Validate() != nil {
		return 0
	}
	return saturatingAdd(c.admitLast(calls), c.ServiceTime)
}

// admitLast returns when, from the first arrival, the last of calls
// requests passes the limit (a queued LeakyBucket's wait included); c
// is valid and calls positive.
func (c Config) admitLast(calls int) time.Duration {
	switch c.Model {
	case TokenBucket:
		if c.Rate == 0 {
			return 0
		}
		return perRate(calls-c.burst(), c.Rate)
	case LeakyBucket:
		if c.NoDelay {
			return perRate(calls-c.Burst-1, c.Rate)
		}
		return perRate(calls-1, c.Rate)
	case FixedWindow, FixedWindowFromFirst:
		windows := (calls-1)/c.Limit + 1
		return saturatingMul(windows-1, c.Window)
	case SlidingWindow:
		if calls <= c.Limit {
			return 0
		}
		return ceilMulDiv(uint64(calls-1), uint64(c.Window), uint64(c.Limit))
	case ConcurrencyCap:
		rounds := (calls-1)/c.Limit + 1
		return saturatingMul(rounds-1, c.ServiceTime)
	}
	return 0
}

// perRate returns the time n requests take at perSecond, 0 for n <= 0,
// saturating at the longest duration.
func perRate(n int, perSecond float64) time.Duration {
	if n <= 0 {
		return 0
	}
	sec := float64(n) / perSecond
	if sec >= math.MaxInt64/float64(time.Second) {
		return math.MaxInt64
	}
	return fromSeconds(sec)
}

// fromSeconds converts seconds to a duration, rounding up to the
// nanosecond so that later rounding to seconds never comes out short.
func fromSeconds(sec float64) time.Duration {
	return time.Duration(math.Ceil(sec * float64(time.Second)))
}
