package ratewise

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// This file is Limit, the client-side limit scope as a user writes it:
// its fields, its validation, the KeyFuncs that key it and the error a
// scope refuses with. limit_scope.go puts it to work, through the scope
// engine (internal/scopes).

// DefaultBurst is a token bucket's size when [Limit.Burst] is zero.
const DefaultBurst = 1

// KeyFunc maps a request to the key its state is kept under: one token
// bucket, cooldown or breaker per key.
type KeyFunc func(*http.Request) string

// Host keys a request by its URL's host (with port, when there is one):
// one state per API server. It is the default KeyFunc.
func Host(req *http.Request) string { return req.URL.Host }

// Global puts every request under one key.
func Global(*http.Request) string { return "" }

// ByHeader keys a request by the value of a header, such as the API key
// a plan limit belongs to. The value is hashed, so a credential used as a
// key never shows in statuses, errors or logs.
func ByHeader(name string) KeyFunc {
	return func(req *http.Request) string {
		v := req.Header.Get(name)
		if v == "" {
			return ""
		}
		sum := sha256.Sum256([]byte(v))
		return name + ":" + hex.EncodeToString(sum[:6])
	}
}

// Limit is one client-side limit scope: a pace (a token bucket, a minimum
// spacing between request starts, a window, or one learned from the
// server) and a cap on requests in flight, kept per key. [WithLimit] may be
// given several times; a request must pass every scope. The zero value
// limits nothing: no bucket, no spacing, Key Host, every request applies, no
// cap, no wait limit but the call's budget, no queue cap, no reserve. See
// "Limits" in the package doc.
type Limit struct {
	// Name labels the scope in statuses and errors; by default "limit N",
	// N counting WithLimit options from 1.
	Name string
	// Rate is the token bucket's refill rate (rate.Every(2*time.Second) is
	// 30 a minute); zero means no bucket, rate.Inf an unlimited one.
	Rate rate.Limit
	// Burst is the bucket's size; zero means DefaultBurst. A Burst needs
	// a Rate or a Window: with neither, and nothing else that limits (a
	// MinSpacing, a MaxConcurrent or Adaptive), Validate refuses it.
	Burst int
	// MinSpacing is the least time between the starts of two requests of
	// one key, as an alternative to Rate; the first request goes at once.
	MinSpacing time.Duration
	// Window makes the scope count requests in a window instead of a
	// bucket: at most Burst requests of a key start in any Window, and the
	// next one waits until the oldest has left it (by 5 ms, for the
	// network between). It holds to a server's
	// fixed window of Burst per Window however the server aligns it, and
	// sends a batch at the quickest such a window allows: Burst at once,
	// then Burst more a Window later. "30 per 10 s" is
	// Limit{Burst: 30, Window: 10 * time.Second}. Past its first
	// window, the window sends its turns in probes, one request, then
	// 2, 4, … up to Burst, each waiting for the answers of the one
	// before; a probe of Burst let through proves the window, which then
	// bursts for good. A server that refuses a probe counts more strictly
	// (a sliding-window counter weighs the last window in): the key's
	// window then yields, and spreads its turns, Burst−½ per Window, from
	// then on; that refusal's wait hint pauses neither the key nor the
	// retry, which takes its turn in the spread. An answer that counts
	// the server's quota with a reset (X-RateLimit-Reset, RateLimit and
	// the like) says when the server's window that counted it ends: the
	// starts it counted then leave the window at that end, when it comes
	// before a Window after them, so that a server whose windows are
	// aligned elsewhere (to the clock) gets the next burst as its window
	// turns. A reset that proves early (cut to its second: the probe it
	// frees is refused) is not read again, and the starts keep their own
	// Windows; a probe refused with a reset already due (the server's
	// window, opened late by a first request's handshake, is about to
	// turn) goes again a little later. It needs Burst (at most
	// 65536: each start of the window is remembered), and takes no Rate,
	// MinSpacing, Reserve, Store or Adaptive.
	Window time.Duration
	// SpacingJitter randomises each gap by ±this fraction of MinSpacing,
	// within [0, 1), so that spaced requests do not beat a fixed rhythm.
	SpacingJitter float64
	// Key maps a request to its key in this scope; nil means Host.
	Key KeyFunc
	// Applies, when set, picks the requests the scope limits: the others
	// pass it untouched, neither paced nor counted, and an Adaptive scope
	// learns nothing from them. Nil means every request. Like Key, it is
	// fixed for the scope's life, and is called for every request that
	// reaches the scope: keep it cheap (a header or path test).
	Applies func(*http.Request) bool
	// MaxConcurrent caps the requests of one key in flight, from admission
	// until the response body is closed (or read to its end).
	MaxConcurrent int
	// MaxWait is the longest a request may wait in this scope; a longer
	// wait fails at once with a *ClientLimitError. Zero leaves only the call's
	// wait budget to bound it.
	MaxWait time.Duration
	// FailFast makes a request that would have to wait fail at once with a
	// *ClientLimitError saying when its turn would come (unknown for a
	// concurrency slot). Nothing is sent.
	FailFast bool
	// MaxQueue caps the requests of one key waiting in this scope; the next
	// one fails at once with a *ClientLimitError instead of queueing without end.
	MaxQueue int
	// Reserve is how many tokens of the bucket PriorityLow requests must
	// leave for the others; it needs a Rate and must be below Burst.
	Reserve int
	// IdleTimeout is how long a key's state outlives its last request;
	// zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Adaptive makes the scope learn each key's limit from the server
	// rather than be told it; New adds one such scope by default (see
	// LearnedScope). A key that has seen no rate-limit signal opens up
	// by slow start, as a TCP connection does: its first request goes
	// alone, and each success lets one more be in flight, doubling them
	// each round trip, so that a first wave larger than the server's
	// burst is refused for one round trip at most; after 256 in flight
	// with no signal, it goes unpaced and costs nothing. A request a told
	// limit paces needs no slow start. From its first signal on, a
	// refusal or a count of the quota, the key is paced by what it
	// learned:
	//   - where responses count the quota (X-RateLimit-*, RateLimit-*,
	//     the IETF draft RateLimit and RateLimit-Policy, and vendors'
	//     forms), it sends what the count says is left, less what is on
	//     its way, at once; then what the server refills, as the counts
	//     measure it for a bucket, or nothing until the reset for a
	//     window;
	//   - where only refusals tell, it measures the server's rate between
	//     refusals and paces just under it, climbing while requests
	//     succeed, and the refusals of one event slow it once;
	//   - a server that refills nothing between refusals, or asks for
	//     pauses of more than a second, is taken for a window: the key
	//     waits for the window to reopen, then sends its quota at once,
	//     and, once the window's period is known, nothing between turns;
	//   - a server that refuses only when many of the key's requests are
	//     in flight caps them: the key is held to that many in flight
	//     rather than paced (ScopeStatus.InFlightCap);
	//   - refusals that come as often to requests sent slowly as to those
	//     sent fast (a server shedding load) are not about rate: the key
	//     gives its pace back, and the retries answer them
	//     (ScopeStatus.Blind).
	// Under a told limit (a Rate, a MinSpacing or a Window of another
	// scope that applies), a key learns only from refusals, below the
	// fastest told pace. Rate, when set, is a ceiling the pace never
	// passes; Burst is not used. After a breaker that closes again the
	// pace resumes at half.
	// A key forgets what it learned when it goes idle.
	Adaptive bool
	// StartRate is the pace of a key an adaptive scope has not learned
	// yet; zero means unpaced until the key's first signal.
	StartRate rate.Limit
	// Store, when set, keeps the scope's token buckets where several
	// transports share them (ratewise/redis, or a MemoryStore), so that a
	// fleet of processes holds one limit together rather than each its
	// own. It needs a finite Rate, and takes no MinSpacing, Reserve or
	// Adaptive. A request that finds no token waits for the time the store
	// says one comes, within its budget. When the store fails, the
	// scope's own bucket stands in, unless the store fails closed.
	Store store.Buckets
}

// paces reports whether the limit sets a pace of its own: a Rate, a
// MinSpacing or a Window.
func (l *Limit) paces() bool {
	return finiteRate(l.Rate) || l.MinSpacing > 0 || l.Window > 0
}

// Validate reports every field of l that is out of range, in one error.
func (l Limit) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: Limit %q: "+format, append([]any{l.Name}, args...)...))
	}
	if l.Rate < 0 || math.IsNaN(float64(l.Rate)) {
		bad("Rate (%v) must not be negative", float64(l.Rate))
	}
	if l.Burst < 0 {
		bad("Burst (%d) must not be negative", l.Burst)
	}
	if l.MinSpacing < 0 {
		bad("MinSpacing (%v) must not be negative", l.MinSpacing)
	}
	switch {
	case l.Window < 0:
		bad("Window (%v) must not be negative", l.Window)
	case l.Window > 0 && (l.Burst < 1 || l.Burst > limit.MaxWindowBurst):
		bad("has a Window (%v): it needs Burst (%d), the requests one window admits, from 1 to %d", l.Window, l.Burst, limit.MaxWindowBurst)
	case l.Window > 0 && (l.Rate != 0 || l.MinSpacing != 0 || l.Reserve != 0 || l.Store != nil || l.Adaptive):
		bad("has a Window (%v): it takes no Rate (%v), MinSpacing (%v), Reserve (%d), Store or Adaptive (%v)",
			l.Window, float64(l.Rate), l.MinSpacing, l.Reserve, l.Adaptive)
	}
	if l.Adaptive && (l.MinSpacing != 0 || l.Reserve != 0) {
		bad("is Adaptive: it takes no MinSpacing (%v) or Reserve (%d)", l.MinSpacing, l.Reserve)
	}
	if l.StartRate < 0 || math.IsNaN(float64(l.StartRate)) || l.StartRate != 0 && !l.Adaptive {
		bad("StartRate (%v) needs Adaptive and must not be negative", float64(l.StartRate))
	}
	if l.Store != nil && !l.keepsBucket() {
		bad("has a Store: it needs a finite Rate (%v), and takes no MinSpacing (%v), Reserve (%d) or Adaptive (%v)",
			float64(l.Rate), l.MinSpacing, l.Reserve, l.Adaptive)
	}
	if l.Rate != 0 && l.MinSpacing != 0 {
		bad("has both Rate (%v) and MinSpacing (%v): give each its own WithLimit", float64(l.Rate), l.MinSpacing)
	}
	if math.IsNaN(l.SpacingJitter) || l.SpacingJitter < 0 || l.SpacingJitter >= 1 {
		bad("SpacingJitter (%v) must be within [0, 1)", l.SpacingJitter)
	}
	if l.MaxConcurrent < 0 {
		bad("MaxConcurrent (%d) must not be negative", l.MaxConcurrent)
	}
	if l.MaxWait < 0 {
		bad("MaxWait (%v) must not be negative", l.MaxWait)
	}
	if l.MaxQueue < 0 {
		bad("MaxQueue (%d) must not be negative", l.MaxQueue)
	}
	if l.Reserve < 0 {
		bad("Reserve (%d) must not be negative", l.Reserve)
	} else if l.Reserve > 0 && (l.Rate == 0 || l.Rate == rate.Inf) {
		bad("Reserve (%d) needs a finite Rate", l.Reserve)
	} else if burst := max(l.Burst, DefaultBurst); l.Reserve > 0 && l.Reserve >= burst {
		bad("Reserve (%d) must be below Burst (%d), or low-priority requests could never pass", l.Reserve, burst)
	}
	if l.IdleTimeout < 0 {
		bad("IdleTimeout (%v) must not be negative", l.IdleTimeout)
	}
	if l.burstAlone() {
		bad("Burst (%d) needs a Rate or a Window, the bucket or window it sizes: with neither, nor a MinSpacing, MaxConcurrent or Adaptive, the Limit would let every request through", l.Burst)
	}
	return errors.Join(errs...)
}

// burstAlone reports whether l has a Burst and nothing that limits: no
// Rate or Window, which a Burst sizes, and no MinSpacing, MaxConcurrent
// or Adaptive, which limit without one. Such a Limit was surely meant to
// limit something, and would let every request through.
func (l *Limit) burstAlone() bool {
	return l.Burst > 0 && l.Rate == 0 && l.Window == 0 && l.MinSpacing == 0 && l.MaxConcurrent == 0 && !l.Adaptive
}

// keepsBucket reports whether l keeps its turns in a token bucket, the
// one kind of told state a store.Buckets holds: a finite Rate, and no
// MinSpacing, Reserve or Adaptive (a Window takes no Rate).
func (l *Limit) keepsBucket() bool {
	return finiteRate(l.Rate) && l.MinSpacing == 0 && l.Reserve == 0 && !l.Adaptive
}

// WithLimit adds a limit scope; give it once per scope. An invalid Limit
// makes every RoundTrip fail with its validation error, which
// [NewTransport] returns. [Transport.AddLimit]
// adds one to a running transport.
func WithLimit(l Limit) Option {
	return func(t *Transport) {
		if l.Name == "" {
			l.Name = t.nextLimitName()
		}
		if err := l.Validate(); err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		t.addScope(newScope(l, t.shared))
	}
}

// ClientLimitError reports a request that a limit scope refused to queue: it
// was not sent; or turns asked of [Transport.Acquire] that it refused:
// none was taken.
type ClientLimitError struct {
	Scope  string      // the Limit's Name
	Key    string      // the request's key in that scope
	Reason LimitReason // why it refused: one of the Limit* reasons
	// RetryIn is when a slot should free up, as far as the scope knows; 0
	// when it cannot tell (a concurrency slot).
	RetryIn time.Duration
	// Err, for LimitStoreUnavailable, is the failure of the shared
	// store, which fails closed (it matches ErrStoreUnavailable).
	Err error
}

// Unwrap returns Err.
func (e *ClientLimitError) Unwrap() error { return e.Err }

// LimitReason is why a scope refused a request, as [ClientLimitError]
// says it; its text (the constant's value) is what logs, traces and JSON
// show.
type LimitReason string

const (
	// LimitFailFast: the scope has no MaxWait and the request's turn is
	// not now.
	LimitFailFast LimitReason = "fail-fast"
	// LimitMaxWait: the turn is further away than the Limit's MaxWait,
	// the call's wait budget or its context's deadline.
	LimitMaxWait LimitReason = "max-wait"
	// LimitMaxQueue: MaxQueue requests of the key already wait.
	LimitMaxQueue LimitReason = "max-queue"
	// LimitStoreUnavailable: the scope's shared store failed, and fails
	// closed.
	LimitStoreUnavailable LimitReason = "store-unavailable"
)

// ErrLimited matches every *ClientLimitError with errors.Is.
var ErrLimited = errors.New("ratewise: client-side limit reached")

// Error says which scope refused, why, and when to come back.
func (e *ClientLimitError) Error() string {
	msg := fmt.Sprintf("ratewise: %s refused the request (%s)", e.Scope, e.Reason)
	if e.RetryIn > 0 {
		msg += fmt.Sprintf("; a slot frees up in %v", e.RetryIn)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrLimited.
func (e *ClientLimitError) Is(target error) bool { return target == ErrLimited }

// withDefaults fills the fields whose zero value means a default: a
// Burst only where a Rate makes it a bucket's size, so that what Limits
// reports validates again.
func (l Limit) withDefaults() Limit {
	if l.Key == nil {
		l.Key = Host
	}
	if l.Burst == 0 && l.Rate != 0 {
		l.Burst = DefaultBurst
	}
	return l
}

// sameKeyFunc reports whether a and b are the same function: KeyFuncs
// cannot be compared with ==.
func sameKeyFunc(a, b KeyFunc) bool { return sameFunc(a, b) }

// sameFunc reports whether a and b, funcs, run the same code (both nil
// included); funcs cannot be compared with ==.
func sameFunc[F any](a, b F) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}
