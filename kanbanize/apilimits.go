package kanbanize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// This file is PlanAuto: the client reads its account's limits from GET
// /api/v2/apiLimits at its first call, paces under them with two limit
// scopes of its key, and reads them again LimitsRereadInterval after the
// last read, so that a changed limit is taken up.
//
// The endpoint's answer, as the API's OpenAPI document gives it, is
// {"data": [ApiLimit]}, an ApiLimit being {"types": string, "limit":
// int32}, "an hourly or minutely api request limit". The document names
// no value of "types": an entry whose "types" says minute ("minute",
// "minutely", "per_minute", "m") is the per-minute limit, one that says
// hour ("hour", "hourly", "h") the per-hour one, and any other entry is
// left out. A limit written as a string of digits is read too.

// LimitsRereadInterval is the time between two reads of an account's
// limits under PlanAuto, at least. A refusal that a client paced under
// the limits it read should not have met (a 429, or error code RL02)
// says they may have been lowered; and a raised limit says nothing. So
// the first call this long after the last read reads them again, whether
// or not a refusal came meanwhile, and the client paces under what it
// reads. An idle client reads nothing; a busy one reads every five
// minutes, which costs an account of 600 requests an hour 2% of them.
const LimitsRereadInterval = 5 * time.Minute

// limitsReadCap bounds the waits of one read of the limits: its retries
// and its turn in the client's pace. A call waits for it only at the
// client's first call, or when it reads them again.
const limitsReadCap = 30 * time.Second

// limitsPath is the endpoint that tells an account its limits.
const limitsPath = "/apiLimits"

// limitsState is where a client of PlanAuto stands with its limits.
type limitsState int32

const (
	// limitsUnread: nothing read yet, or the read was given up by its
	// caller: the next call reads them, and the calls beside it wait.
	limitsUnread limitsState = iota
	// limitsTold: read; the key's scopes pace it under them.
	limitsTold
	// limitsLearning: the endpoint did not tell them this time (a network
	// error, a 5xx, a refusal, an empty list): the transport learns the
	// limits from the refusals, and a call reads them again after
	// LimitsRereadInterval.
	limitsLearning
	// limitsOff: the endpoint is not there for this key (404, 403, 401)
	// or answers what cannot be read: the transport learns the limits,
	// and the client never asks again.
	limitsOff
)

// autoLimits is a client's PlanAuto: what it read of its key's limits and
// the scopes it paces the key with. It is safe for concurrent use.
type autoLimits struct {
	key  string // the API key, whose requests the scopes apply to
	hash string // the key as ratewise.ByHeader("apikey") keeps it: the scopes' key
	name string // "kanbanize auto apikey:…": the scopes' names less " per minute"
	rw   *ratewise.Transport

	state atomic.Int32 // a limitsState

	mu      sync.Mutex
	reading chan struct{} // closed when the read in flight ends; nil when none; guarded by mu
	// stale is when the last read goes stale (LimitsRereadInterval after
	// it), in Unix nanoseconds: what a call checks without the lock.
	stale  atomic.Int64
	limits Limits // what the last read that told them said; guarded by mu
}

func newAutoLimits(apiKey string, rw *ratewise.Transport) *autoLimits {
	hash := ratewise.ByHeader("apikey")(&http.Request{Header: http.Header{apiKeyHeader: {apiKey}}})
	return &autoLimits{key: apiKey, hash: hash, name: "kanbanize auto " + hash, rw: rw}
}

// applies picks the requests the scopes limit: those of the client's key.
func (a *autoLimits) applies(req *http.Request) bool {
	v := req.Header[apiKeyHeader]
	return len(v) > 0 && v[0] == a.key
}

// told returns the limits the client paces under, and whether it does.
func (a *autoLimits) told() (Limits, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limits, limitsState(a.state.Load()) == limitsTold
}

// prepare readies a call of c: at the client's first call it reads the
// limits (the calls beside it wait for that read, as long as ctx lets
// them); once LimitsRereadInterval has passed since the last read, it
// reads them again (the other calls go on meanwhile). Past the first call
// and between reads, it costs two atomic loads and a clock read.
func (a *autoLimits) prepare(ctx context.Context, c *Client) error {
	switch limitsState(a.state.Load()) {
	case limitsOff:
	case limitsUnread:
		return a.first(ctx, c)
	default:
		if time.Now().UnixNano() >= a.stale.Load() {
			a.reread(ctx, c)
		}
	}
	return nil
}

// first reads the limits once: the first caller reads, the others wait
// for its read. A read its caller gave up leaves them unread, and a
// caller still waiting reads them.
func (a *autoLimits) first(ctx context.Context, c *Client) error {
	for {
		a.mu.Lock()
		if limitsState(a.state.Load()) != limitsUnread {
			a.mu.Unlock()
			return nil
		}
		if ch := a.reading; ch != nil {
			a.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if a.adopt() {
			a.mu.Unlock()
			return nil
		}
		ch := make(chan struct{})
		a.reading = ch
		a.mu.Unlock()
		a.read(ctx, c, ch)
		return ctx.Err()
	}
}

// adopt takes the limits of the key's scopes when the transport has them
// already, added by another client of the key sharing it: the key's
// limits are read once per transport. With a.mu held.
func (a *autoLimits) adopt() bool {
	limits := a.rw.Limits()
	minute, okM := scopeNamed(limits, a.name+" per minute")
	hour, okH := scopeNamed(limits, a.name+" per hour")
	if !okM || !okH {
		return false
	}
	a.limits = Limits{PerMinute: toldLimit(minute), PerHour: toldLimit(hour)}
	a.stale.Store(time.Now().Add(LimitsRereadInterval).UnixNano())
	a.state.Store(int32(limitsTold))
	return true
}

// toldLimit is the quota of a scope limitScopes made: its Burst, or 0
// for one that limits nothing.
func toldLimit(l ratewise.Limit) int {
	if l.Rate == rate.Inf {
		return 0
	}
	return l.Burst
}

func scopeNamed(limits []ratewise.Limit, name string) (ratewise.Limit, bool) {
	i := slices.IndexFunc(limits, func(l ratewise.Limit) bool { return l.Name == name })
	if i < 0 {
		return ratewise.Limit{}, false
	}
	return limits[i], true
}

// reread reads the limits again, when no read is in flight and the last
// ended LimitsRereadInterval ago or more.
func (a *autoLimits) reread(ctx context.Context, c *Client) {
	a.mu.Lock()
	if a.reading != nil || time.Now().UnixNano() < a.stale.Load() {
		a.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	a.reading = ch
	a.mu.Unlock()
	a.read(ctx, c, ch)
}

// read reads the limits and paces the key under them, then closes ch. A
// read whose caller gave up (ctx ended) changes nothing. A read that
// fails leaves limits already read in force. What it did is logged once
// a.mu is released: a logger is the caller's code.
func (a *autoLimits) read(ctx context.Context, c *Client, ch chan struct{}) {
	limits, err := c.fetchLimits(ctx)
	a.mu.Lock()
	note := a.settle(limits, err, err != nil && ctx.Err() != nil)
	a.reading = nil
	close(ch)
	a.mu.Unlock()
	if note.msg != "" {
		c.logLimits(ctx, note.level, note.msg, note.outcome, note.limits, note.err)
	}
}

// limitsNote is what a read of the limits logs; no msg, nothing.
type limitsNote struct {
	level   slog.Level
	msg     string
	outcome string
	limits  Limits
	err     error
}

// settle takes what a read of the limits found: limits, or the error
// err; gaveUp when its caller went away, which teaches nothing. With
// a.mu held.
func (a *autoLimits) settle(limits Limits, err error, gaveUp bool) limitsNote {
	if gaveUp {
		return limitsNote{}
	}
	a.stale.Store(time.Now().Add(LimitsRereadInterval).UnixNano())
	state := limitsState(a.state.Load())
	if err == nil && (state != limitsTold || limits != a.limits) {
		// Unchanged limits are left as they are: told again, a scope
		// would trust them anew over what the key learned below them.
		err = a.install(limits, state == limitsTold)
	}
	switch {
	case err == nil:
		old := a.limits
		a.limits = limits
		a.state.Store(int32(limitsTold))
		switch {
		case state != limitsTold:
			return limitsNote{slog.LevelInfo, "pacing under the account's API limits", "read", limits, nil}
		case old != limits:
			return limitsNote{slog.LevelInfo, "the account's API limits changed", "changed", limits, nil}
		}
		return limitsNote{}
	case state == limitsTold:
		// Keep the limits read before: refusals and learning cover what
		// they may miss until the next read.
		return limitsNote{slog.LevelWarn, "could not read the account's API limits again: keeping the last read", "unavailable", a.limits, err}
	case permanent(err):
		a.state.Store(int32(limitsOff))
	default:
		a.state.Store(int32(limitsLearning))
	}
	return limitsNote{slog.LevelWarn, "could not read the account's API limits: the transport learns them from refusals", "unavailable", Limits{}, err}
}

// install paces the key under limits: its scopes are added the first
// time, changed after. A scope added now takes the turn of the read's
// own request, which the API counted before the scope was there; a
// scope changed keeps its bucket's tokens, less the quota it lost when
// the limit is lowered, so that what the last requests spent still
// counts.
func (a *autoLimits) install(limits Limits, again bool) error {
	for _, l := range limitScopes(a.name, limits, a.applies) {
		cur, ok := scopeNamed(a.rw.Limits(), l.Name)
		if !ok {
			err := a.rw.AddLimit(l)
			if err == nil {
				if !again {
					_ = a.rw.Acquire(context.Background(), l.Name, a.hash, 1, 0) // a fresh bucket has the turn
				}
				continue
			}
			if cur, ok = scopeNamed(a.rw.Limits(), l.Name); !ok {
				return fmt.Errorf("kanbanize: pacing under the account's API limits: %w", err)
			}
			// Another client of the key sharing the transport added it
			// meanwhile: change it to what this read says.
		}
		// A bucket cut down keeps the tokens it has up to its new size,
		// which would forget what the last requests spent: it keeps
		// what it had less the quota it lost instead.
		tokens, had := a.tokens(l.Name)
		lowered := had && cur.Rate != rate.Inf && l.Rate != rate.Inf && l.Burst < cur.Burst
		lost := cur.Burst - l.Burst
		cur.Rate, cur.Burst = l.Rate, l.Burst
		if err := a.rw.SetLimit(cur); err != nil {
			return fmt.Errorf("kanbanize: pacing under the account's API limits: %w", err)
		}
		// What the bucket lost, rounded up (less a float's noise), so
		// that what the requests spent is never forgotten.
		if take := int(math.Ceil(min(tokens, float64(l.Burst)) - max(0, tokens-float64(lost)) - 1e-9)); lowered && take >= 1 {
			_ = a.rw.Acquire(context.Background(), l.Name, a.hash, take, 0)
		}
	}
	return nil
}

// tokens returns the tokens of the key's bucket in the scope named name,
// and whether it has one.
func (a *autoLimits) tokens(name string) (float64, bool) {
	for _, s := range a.rw.KeyStatus(a.hash).Scopes {
		if s.Name == name && s.Burst > 0 {
			return s.Tokens, true
		}
	}
	return 0, false
}

// errNoLimits is an answer of the limits endpoint that names none.
var errNoLimits = errors.New("kanbanize: GET /apiLimits named no per-minute or per-hour limit")

// permanent reports whether a failed read of the limits would fail again:
// the endpoint is not there for the key (404, 403, or another 4xx that
// is no refusal), or it answers what cannot be read.
func permanent(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.StatusCode >= 400 && ae.StatusCode < 500 && !ae.RateLimited()
	}
	var ue *url.Error
	return !errors.Is(err, errNoLimits) && !errors.As(err, &ue) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// limitsPolicy is how a read of the limits retries: as the client's
// calls do (RL02 is a refusal, gateway errors are retried), three
// attempts within limitsReadCap.
var limitsPolicy = RetryOptions{MaxAttempts: 3, InitialDelayMs: 1000, TotalWaitCapMs: int(limitsReadCap / time.Millisecond)}.RetryPolicy()

// fetchLimits reads the account's limits from GET /api/v2/apiLimits. The
// request goes through the client's transport, so that it is paced and
// counted as the API counts it, but in a context of its own: ctx's
// values (a call's budget, stats, trace and retry policy) do not apply
// to it, and it ends when ctx does or after limitsReadCap.
func (c *Client) fetchLimits(ctx context.Context) (Limits, error) {
	rctx, cancel := context.WithTimeout(context.Background(), limitsReadCap)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	rctx = ratewise.WithRetryPolicy(rctx, limitsPolicy)
	var entries []struct {
		Types string          `json:"types"`
		Limit json.RawMessage `json:"limit"`
	}
	if err := c.do(rctx, limitsPath, &entries); err != nil {
		return Limits{}, err
	}
	var l Limits
	for _, e := range entries {
		n, err := strconv.Atoi(strings.Trim(string(e.Limit), `"`))
		if err != nil || n < 1 || n > maxLimit {
			continue
		}
		into := windowOf(e.Types, &l)
		if into != nil && (*into == 0 || n < *into) {
			*into = n // of two limits of a window, the stricter binds
		}
	}
	if l == (Limits{}) {
		return l, errNoLimits
	}
	return l, nil
}

// windowOf returns the field of l that an ApiLimit's "types" names, or
// nil when it names neither a minute nor an hour.
func windowOf(types string, l *Limits) *int {
	t := strings.ToLower(strings.TrimSpace(types))
	switch {
	case strings.Contains(t, "minute") || t == "m" || t == "min":
		return &l.PerMinute
	case strings.Contains(t, "hour") || t == "h" || t == "hr":
		return &l.PerHour
	}
	return nil
}

// logLimits logs, as event=api_limits, what a read of the limits did:
// outcome read, changed or unavailable, the limits in force, and the
// error of a read that failed. No API key is logged.
func (c *Client) logLimits(ctx context.Context, level slog.Level, msg, outcome string, l Limits, err error) {
	if c.log == nil || !c.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{slog.String("event", "api_limits"), slog.String("outcome", outcome),
		slog.Int("per_minute", l.PerMinute), slog.Int("per_hour", l.PerHour)}
	if err != nil {
		attrs = append(attrs, slog.String("error", strings.TrimPrefix(err.Error(), "kanbanize: ")))
	}
	c.log.LogAttrs(ctx, level, msg, attrs...)
}
