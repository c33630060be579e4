package ratewise

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ratewise/ratewise/store"
)

// Defaults of [BreakerPolicy]: a zero field means the matching constant.
const (
	DefaultConsecutiveFailures = 5
	DefaultBreakerWindow       = 10 * time.Minute
	DefaultBreakerCooldown     = 60 * time.Second
	DefaultBreakerDecay        = time.Hour
	DefaultHalfOpenProbes      = 1
	DefaultProbeTimeout        = 30 * time.Second
)

// NoRetripEscalation, set as [BreakerPolicy.RetripWindow], keeps a breaker
// that trips again soon after it closed at the level the Decay left
// (zero means Decay).
const NoRetripEscalation = -1

// BreakerState is a circuit breaker's state.
type BreakerState uint8

const (
	// BreakerClosed lets requests through and counts their failures.
	BreakerClosed BreakerState = iota
	// BreakerHalfOpen lets a few probes through to test the server.
	BreakerHalfOpen
	// BreakerOpen sends nothing until its cooldown is over.
	BreakerOpen
)

// String returns "closed", "half-open" or "open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerHalfOpen:
		return "half-open"
	case BreakerOpen:
		return "open"
	}
	return fmt.Sprintf("BreakerState(%d)", uint8(s))
}

// MarshalText writes the state's name, for JSON.
func (s BreakerState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// BreakerPolicy configures the per-key circuit breakers, built on
// sony/gobreaker. A breaker trips open after ConsecutiveFailures failures in
// a row, or WindowFailures within Window, and sends nothing while open; after
// its cooldown it lets HalfOpenProbes probes through, and a failed probe
// opens it for the next, longer cooldown of Escalation. It counts a burst of
// rate-limit refusals as one failure (see "Breakers" in the package doc).
// The zero value is ready to use: every zero field means its documented
// default.
type BreakerPolicy struct {
	// Key maps a request to its breaker; nil means Host.
	Key KeyFunc
	// ConsecutiveFailures trips the breaker; zero means
	// DefaultConsecutiveFailures.
	ConsecutiveFailures int
	// WindowFailures, when set, also trips the breaker on that many
	// failures within Window, successes or not in between.
	WindowFailures int
	// Window is the rolling window of WindowFailures, kept in ten steps;
	// zero means DefaultBreakerWindow.
	Window time.Duration
	// Cooldown is how long the breaker stays open after it trips; zero
	// means DefaultBreakerCooldown.
	Cooldown time.Duration
	// Escalation lists the cooldowns after failed probes and quick
	// re-trips, beyond Cooldown, which is the first: a trip opens the
	// breaker for Cooldown, the first failed probe (or quick re-trip) for
	// Escalation[0], the next for Escalation[1], and so on, staying at the
	// last. For cooldowns of 1h, 6h, 12h, 24h and 48h, set Cooldown to 1h
	// and Escalation to 6h, 12h, 24h, 48h; with 1h in Escalation too, the
	// breaker would wait 1h twice. Each must be at least Cooldown. Empty
	// means Cooldown every time.
	Escalation []time.Duration
	// Decay is the quiet time, without a trip, after which the cooldown
	// steps one level back down; zero means DefaultBreakerDecay.
	Decay time.Duration
	// RetripWindow is how soon after the breaker closed a new trip counts
	// as the same trouble come back: it opens the breaker one level up,
	// as a failed probe does ("a second detection within 24h" waits 6h
	// where the first waited 1h). Zero means Decay; NoRetripEscalation
	// makes a trip start from the level the Decay left.
	RetripWindow time.Duration
	// HalfOpenProbes is how many probes may be in flight at once while
	// half-open; zero means DefaultHalfOpenProbes.
	HalfOpenProbes int
	// SuccessesToClose is how many probes in a row must succeed to close
	// the breaker; zero means HalfOpenProbes. It may not be below it.
	SuccessesToClose int
	// ProbeTimeout bounds a probe's wait for response headers: a probe that
	// hangs longer counts as a failure. Zero means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// IsFailure decides what counts against the breaker. Nil means
	// rate-limited responses (429, and whatever the retry policy reads as
	// rate-limited), 5xx and network errors; other statuses do not. A
	// request cancelled by its own context never counts, nor does a
	// rate-limited response IsFailure counts that is the sibling of one
	// counted already (see above).
	IsFailure func(resp *http.Response, err error) bool
	// OnStateChange, when set, is told of every change of a key's breaker:
	// from and to which state, its level, and when it last opened and why.
	// It runs outside any lock of the transport, in the goroutine of the
	// request that caused the change, or of a timer for a probe that timed
	// out; changes of one key may be reported concurrently.
	OnStateChange func(BreakerChange)
	// FailFast makes a request that finds its breaker open, or half-open
	// with every probe slot taken, fail at once with a *CircuitOpenError
	// saying when it resets, instead of waiting for the reset or the
	// probe's outcome within its wait budget: a batch can stop at the
	// first refusal rather than wait, item by item, for a server that
	// asked for hours. Nothing is sent either way.
	FailFast bool
	// IdleTimeout is how long a closed breaker outlives its key's last
	// request; zero means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Store, when set, shares the breaker's trips with every transport
	// given the same store (ratewise/redis, or a MemoryStore): failures
	// are counted across them against ConsecutiveFailures and
	// WindowFailures, a trip opens the breaker in all of them (and, in
	// Redis, outlives a restart), and one of them at a time sends the
	// probe when the cooldown is over, while the others' requests wait
	// for its outcome, asking the store again, within their budget. Each
	// transport keeps its own breaker as well. Each request asks the
	// store first, and tells it its outcome if it counts: a failure (the
	// first refusal of each rate-limit event the transport sees), or a
	// success (which clears the failures counted across the fleet). When
	// the store fails, the local breaker decides alone, unless the store
	// fails closed: then the request fails with a *CircuitOpenError and
	// is not sent.
	Store store.Breakers
}

// WithDefaults returns p with each zero field set to its default.
func (p BreakerPolicy) WithDefaults() BreakerPolicy {
	if p.Key == nil {
		p.Key = Host
	}
	if p.ConsecutiveFailures == 0 {
		p.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	if p.Window == 0 {
		p.Window = DefaultBreakerWindow
	}
	if p.Cooldown == 0 {
		p.Cooldown = DefaultBreakerCooldown
	}
	if p.Decay == 0 {
		p.Decay = DefaultBreakerDecay
	}
	if p.RetripWindow == 0 {
		p.RetripWindow = p.Decay
	}
	if p.HalfOpenProbes == 0 {
		p.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if p.SuccessesToClose == 0 {
		p.SuccessesToClose = p.HalfOpenProbes
	}
	if p.ProbeTimeout == 0 {
		p.ProbeTimeout = DefaultProbeTimeout
	}
	return p
}

// Validate reports every field of p that is out of range, in one error.
func (p BreakerPolicy) Validate() error {
	d := p.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: BreakerPolicy."+format, args...))
	}
	positive := []struct {
		name  string
		value int64
	}{
		{"ConsecutiveFailures", int64(d.ConsecutiveFailures)}, {"Window", int64(d.Window)},
		{"Cooldown", int64(d.Cooldown)}, {"Decay", int64(d.Decay)}, {"HalfOpenProbes", int64(d.HalfOpenProbes)},
		{"SuccessesToClose", int64(d.SuccessesToClose)}, {"ProbeTimeout", int64(d.ProbeTimeout)},
	}
	for _, f := range positive {
		if f.value < 0 {
			bad("%s (%d) must not be negative", f.name, f.value)
		}
	}
	if d.WindowFailures < 0 {
		bad("WindowFailures (%d) must not be negative", d.WindowFailures)
	}
	if d.SuccessesToClose < d.HalfOpenProbes {
		bad("SuccessesToClose (%d) is below HalfOpenProbes (%d)", d.SuccessesToClose, d.HalfOpenProbes)
	}
	if d.ConsecutiveFailures > math.MaxUint32 || d.WindowFailures > math.MaxUint32 || d.SuccessesToClose > math.MaxUint32 {
		bad("counts must fit in 32 bits")
	}
	for i, c := range d.Escalation {
		if c < d.Cooldown {
			bad("Escalation[%d] (%v) is below Cooldown (%v)", i, c, d.Cooldown)
		}
	}
	if d.IdleTimeout < 0 {
		bad("IdleTimeout (%v) must not be negative", d.IdleTimeout)
	}
	if d.RetripWindow < 0 && d.RetripWindow != NoRetripEscalation {
		bad("RetripWindow (%v) must not be negative, but for NoRetripEscalation", d.RetripWindow)
	}
	return errors.Join(errs...)
}

// WithBreaker adds per-key circuit breakers. An invalid policy makes every
// RoundTrip fail with its validation error, which [NewTransport] returns.
func WithBreaker(p BreakerPolicy) Option {
	return func(t *Transport) {
		if err := p.Validate(); err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		t.breakers = newBreakers(p.WithDefaults())
	}
}

// BreakerCause is what opened a breaker: the failure that tripped it, or
// the probe's that failed. Its zero value means none is known.
type BreakerCause struct {
	// StatusCode is the response's status; 0 when there was none (a
	// network error, or a probe that timed out).
	StatusCode int `json:"status,omitempty"`
	// Class is the retry policy's reading of the response; Final when
	// there was none.
	Class Class `json:"class"`
	// Detail is the first line of the response's body, or the error's
	// text, with credentials taken out ([Redact]), at most
	// maxCauseDetail bytes.
	Detail string `json:"detail,omitempty"`
}

// forStore is c as a store keeps it.
func (c BreakerCause) forStore() store.Cause {
	return store.Cause{StatusCode: c.StatusCode, Class: uint8(c.Class), Detail: c.Detail}
}

// causeFromStore is the BreakerCause a store kept.
func causeFromStore(c store.Cause) BreakerCause {
	return BreakerCause{StatusCode: c.StatusCode, Class: Class(c.Class), Detail: c.Detail}
}

// maxCauseDetail bounds BreakerCause.Detail: a line to read in a log or
// a status, not a body to store; causePeek is what is read of a body
// to find it.
const (
	maxCauseDetail = 200
	causePeek      = 512
)

// newBreakerCause describes the failure of an attempt of req: its
// response's status, class and first line, or its error. It reads at most
// causePeek bytes of the body, which stays readable in full.
func newBreakerCause(req *http.Request, resp *http.Response, err error, class Class) BreakerCause {
	if err != nil {
		return BreakerCause{Detail: boundedLine(redactError(err, req))}
	}
	return BreakerCause{StatusCode: resp.StatusCode, Class: class,
		Detail: boundedLine(Redact(string(firstLine(peekBody(resp, causePeek))), req))}
}

// firstLine is the first line of b that is not blank.
func firstLine(b []byte) []byte {
	for len(b) > 0 {
		line, rest, _ := bytes.Cut(b, []byte("\n"))
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line
		}
		b = rest
	}
	return nil
}

// boundedLine is s on one line, cut to maxCauseDetail bytes of valid
// UTF-8.
func boundedLine(s string) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
	if len(s) <= maxCauseDetail {
		return s
	}
	cut := maxCauseDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// ErrCircuitOpen matches every *CircuitOpenError with errors.Is.
var ErrCircuitOpen = errors.New("ratewise: circuit breaker open")

// CircuitOpenError reports a request not sent because its key's breaker is
// open and the reset does not fit the call's wait budget or deadline, or is
// half-open with every probe slot taken until the budget ran out, or at once
// for either with [BreakerPolicy.FailFast]. ResetIn is how long it stays
// open; 0 when half-open, as the probes' outcome decides.
type CircuitOpenError struct {
	Key      string
	State    BreakerState  // BreakerOpen, or BreakerHalfOpen
	ResetIn  time.Duration // until the breaker lets a probe through; 0 when half-open
	Failures int           // the failures that tripped it
	// Err, when set, is why the breaker is taken for open: its shared
	// store failed, and fails closed (it matches ErrStoreUnavailable).
	Err error
}

// Error describes the breaker and when it resets.
func (e *CircuitOpenError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("ratewise: circuit breaker for %s taken for open: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("ratewise: circuit breaker for %s is %s after %d failures; resets in %v",
		e.Key, e.State, e.Failures, e.ResetIn)
}

// Unwrap returns Err.
func (e *CircuitOpenError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCircuitOpen.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// MarshalJSON writes the error for tool servers:
// {"error":"circuit_open","key":…,"state":…,"reset_in_seconds":…,"failures":…}.
func (e *CircuitOpenError) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Error    string  `json:"error"`
		Key      string  `json:"key"`
		State    string  `json:"state"`
		ResetIn  float64 `json:"reset_in_seconds"`
		Failures int     `json:"failures"`
	}{"circuit_open", e.Key, e.State.String(), e.ResetIn.Seconds(), e.Failures})
}
