package ratewise

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Defaults of [RetryPolicy]: a zero field means the matching constant.
const (
	DefaultMaxAttempts     = 5
	DefaultInitialDelay    = 1 * time.Second
	DefaultMaxDelay        = 30 * time.Second
	DefaultMultiplier      = 2.0
	DefaultJitterFraction  = 0.2
	DefaultTotalWaitCap    = 2 * time.Minute
	DefaultNetworkRetries  = 2
	DefaultMaxBufferedBody = 1 << 20 // 1 MiB
	// DefaultRetryBudget and DefaultRetryBudgetFloor let retries to a host
	// reach a fifth of its first attempts plus ten a second, as Finagle's
	// and Envoy's retry budgets do.
	DefaultRetryBudget      = 0.2
	DefaultRetryBudgetFloor = 10.0
)

// NoRetryBudget, set as [RetryPolicy.RetryBudget], lets retries go
// unbudgeted (zero means [DefaultRetryBudget]).
const NoRetryBudget = -1

// NoNetworkRetries, set as [RetryPolicy.NetworkRetries], turns off retries
// after network errors (zero means [DefaultNetworkRetries]).
const NoNetworkRetries = -1

// Jitter says how a computed backoff delay is randomised so that clients
// refused together do not come back together.
type Jitter uint8

const (
	// JitterFull draws the delay uniformly from [0, base]: the spread that
	// best breaks up a herd of retrying clients. It is the zero value.
	JitterFull Jitter = iota
	// JitterProportional draws the delay from base × (1 ± JitterFraction).
	JitterProportional
	// JitterNone uses the computed delay as is.
	JitterNone
)

// String returns the mode's name: "full", "proportional" or "none".
func (j Jitter) String() string {
	switch j {
	case JitterFull:
		return "full"
	case JitterProportional:
		return "proportional"
	case JitterNone:
		return "none"
	}
	return fmt.Sprintf("Jitter(%d)", uint8(j))
}

// RetryPolicy says when and how long the transport waits before trying a
// request again. The zero value is ready to use: every zero field means the
// Default constant of the same name (DefaultMaxAttempts and so on), so a
// policy only names what it changes. A RetryPolicy is a plain value; copy it
// freely.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, the first included; 1 turns
	// retries off.
	MaxAttempts int
	// InitialDelay is the backoff base before the first retry.
	InitialDelay time.Duration
	// MaxDelay caps the computed backoff, jitter included. It does not cap a
	// server's Retry-After hint, which is honoured exactly.
	MaxDelay time.Duration
	// Multiplier grows the backoff base from one retry to the next.
	Multiplier float64
	// Jitter randomises each delay; the zero value is JitterFull.
	Jitter Jitter
	// JitterFraction is f in JitterProportional's base × (1 ± f), in [0, 1].
	JitterFraction float64
	// TotalWaitCap bounds the time one call may spend waiting, summed over
	// its waits. A wait that cannot end inside what is left is not started:
	// the call ends at once with its last response. A budget set with
	// [WithBudget] replaces it.
	TotalWaitCap time.Duration
	// IgnoreRetryAfter makes the delay the policy's backoff alone, whatever
	// the server asked for; the call's refusals then do not pause the key's
	// other requests through the pause gate either.
	IgnoreRetryAfter bool
	// NetworkRetries bounds retries after network errors (no response),
	// which happen only for idempotent methods (GET, HEAD, OPTIONS, TRACE,
	// PUT, DELETE) or requests carrying an Idempotency-Key or
	// X-Idempotency-Key header. NoNetworkRetries turns them off.
	NetworkRetries int
	// MaxBufferedBody is the largest request body without GetBody that is
	// buffered so it can be sent again. Only a body of known ContentLength
	// is buffered: a larger one, or a stream of unknown length (which may
	// be slow or wait on the response), gets one attempt only. Requests
	// made by http.NewRequest from a bytes or strings reader have GetBody
	// and need no buffer.
	MaxBufferedBody int64
	// RetryBudget is the share of a host's first attempts that its retries
	// may add, e.g. 0.2 for a fifth; RetryBudgetFloor is the retries a
	// second a host may have whatever its traffic, so that a quiet client
	// still retries. Over budget, a call returns its last response (or,
	// after a network error, an error matching ErrRetryBudgetExhausted)
	// instead of retrying: a fleet facing a failing API does not multiply
	// its load by MaxAttempts. A retry of a refusal whose wait hint it
	// waits out takes nothing from it: it goes when the server said it
	// may, adding nothing to what the server lets through. The budget is
	// the transport's, per host; a
	// host's balance starts full and holds at most ten seconds of the
	// floor plus the share of a hundred requests. NoRetryBudget turns it
	// off.
	RetryBudget      float64
	RetryBudgetFloor float64
	// Classify, when set, replaces DefaultClassify. It must not read the
	// response body; the body rules below read it.
	Classify func(*http.Response) Class
	//
	// The body rules read at most the first 4 KiB of a response body, and
	// only for a response the status and headers leave Final: the caller
	// still gets the whole body, as it came, and its Close. A policy with
	// no body rule reads no body. Phrases match ignoring case, and an
	// apostrophe in any of its usual spellings (', ’, &#39;, &rsquo;,
	// \u0027 and the like) matches any other. The rules are tried in the
	// order below.
	//
	// BlockPhrases mark a response of any status, 2xx included, as
	// Blocked when one of them appears in its body: an answer that
	// refuses the client while saying 200, such as YouTube's "Sign in to
	// confirm you're not a bot" or "LOGIN_REQUIRED". Every response then
	// waits for its first 4 KiB (or its end) before it is handed over: set
	// them on a transport whose responses are not streams.
	BlockPhrases []string
	// RateLimitPhrases mark a non-2xx response as RateLimited, and so
	// retried, when one of them appears in its body (e.g. "rate limit",
	// "secondary rate limit").
	RateLimitPhrases []string
	// ClassifyBody, when set, classifies what the phrases leave Final or
	// Retryable, of any status: it gets the response and the first 4 KiB of its body
	// (fewer when the body is shorter), which it must neither change nor
	// keep, and its answer stands unless it is Final. Return RateLimited
	// for a refusal worth retrying, Blocked for one that is not.
	ClassifyBody func(resp *http.Response, head []byte) Class
}

// DefaultRetryPolicy returns the policy with every default spelled out; it
// equals RetryPolicy{}.WithDefaults().
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{}.WithDefaults()
}

// WithDefaults returns p with each zero field set to its default: the
// policy a Transport actually runs.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = DefaultInitialDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	if p.JitterFraction == 0 {
		p.JitterFraction = DefaultJitterFraction
	}
	if p.TotalWaitCap == 0 {
		p.TotalWaitCap = DefaultTotalWaitCap
	}
	if p.NetworkRetries == 0 {
		p.NetworkRetries = DefaultNetworkRetries
	}
	if p.MaxBufferedBody == 0 {
		p.MaxBufferedBody = DefaultMaxBufferedBody
	}
	if p.RetryBudget == 0 {
		p.RetryBudget = DefaultRetryBudget
	}
	if p.RetryBudgetFloor == 0 {
		p.RetryBudgetFloor = DefaultRetryBudgetFloor
	}
	return p
}

// Validate reports every field of p that is out of range, in one error
// naming each field and its value. Zero fields are read as their defaults.
func (p RetryPolicy) Validate() error {
	d := p.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ratewise: RetryPolicy."+format, args...))
	}
	if d.MaxAttempts < 1 {
		bad("MaxAttempts (%d) must be at least 1", d.MaxAttempts)
	}
	if d.InitialDelay < 0 {
		bad("InitialDelay (%v) must not be negative", d.InitialDelay)
	}
	if d.MaxDelay < 0 {
		bad("MaxDelay (%v) must not be negative", d.MaxDelay)
	} else if d.InitialDelay > 0 && d.MaxDelay < d.InitialDelay {
		bad("MaxDelay (%v%s) is below InitialDelay (%v%s)", d.MaxDelay, defaultNote(p.MaxDelay == 0),
			d.InitialDelay, defaultNote(p.InitialDelay == 0))
	}
	if math.IsNaN(d.Multiplier) || math.IsInf(d.Multiplier, 0) || d.Multiplier < 1 {
		bad("Multiplier (%v) must be a finite number of at least 1", d.Multiplier)
	}
	if d.Jitter > JitterNone {
		bad("Jitter (%d) is not a known mode (JitterFull, JitterProportional or JitterNone)", uint8(d.Jitter))
	}
	if math.IsNaN(d.JitterFraction) || d.JitterFraction < 0 || d.JitterFraction > 1 {
		bad("JitterFraction (%v) must be within [0, 1]", d.JitterFraction)
	}
	if d.TotalWaitCap < 0 {
		bad("TotalWaitCap (%v) must not be negative", d.TotalWaitCap)
	} else if d.InitialDelay > 0 && d.TotalWaitCap < d.InitialDelay {
		bad("TotalWaitCap (%v%s) is below InitialDelay (%v%s)", d.TotalWaitCap, defaultNote(p.TotalWaitCap == 0),
			d.InitialDelay, defaultNote(p.InitialDelay == 0))
	}
	if d.NetworkRetries < NoNetworkRetries {
		bad("NetworkRetries (%d) must be at least 0, or NoNetworkRetries", d.NetworkRetries)
	}
	if math.IsNaN(d.RetryBudget) || math.IsInf(d.RetryBudget, 0) || d.RetryBudget < 0 && d.RetryBudget != NoRetryBudget {
		bad("RetryBudget (%v) must be a finite share of at least 0, or NoRetryBudget", d.RetryBudget)
	}
	if math.IsNaN(d.RetryBudgetFloor) || math.IsInf(d.RetryBudgetFloor, 0) || d.RetryBudgetFloor < 0 {
		bad("RetryBudgetFloor (%v) must be a finite number of retries a second, at least 0", d.RetryBudgetFloor)
	}
	if d.MaxBufferedBody < 0 {
		bad("MaxBufferedBody (%d) must not be negative", d.MaxBufferedBody)
	}
	for i, phrase := range d.RateLimitPhrases {
		if strings.TrimSpace(phrase) == "" {
			bad("RateLimitPhrases[%d] is empty: it would match every body", i)
		}
	}
	for i, phrase := range d.BlockPhrases {
		if strings.TrimSpace(phrase) == "" {
			bad("BlockPhrases[%d] is empty: it would match every body", i)
		}
	}
	return errors.Join(errs...)
}

func defaultNote(isDefault bool) string {
	if isDefault {
		return ", the default"
	}
	return ""
}

// Backoff returns the jittered delay before retry number retry, counted
// from 0 for the first retry: InitialDelay × Multiplier^retry, capped at
// MaxDelay, then randomised by the Jitter mode. It ignores any server hint.
func (p RetryPolicy) Backoff(retry int) time.Duration {
	d := p.WithDefaults()
	return d.jittered(retry)
}

// jittered is Backoff of a policy whose defaults are filled in, as the
// transport's are: it draws without copying the policy again.
func (p *RetryPolicy) jittered(retry int) time.Duration {
	if p.Jitter == JitterNone {
		return p.backoff(retry, 0)
	}
	return p.backoff(retry, rand.Float64())
}

// prepared is p as a transport keeps it: validated, its defaults filled
// in, its phrases its own, so that the caller changing them later changes
// nothing.
func (p RetryPolicy) prepared() (*RetryPolicy, error) {
	err := p.Validate()
	p = p.WithDefaults()
	p.RateLimitPhrases = slices.Clone(p.RateLimitPhrases)
	p.BlockPhrases = slices.Clone(p.BlockPhrases)
	return &p, err
}

// backoff is Backoff with the random draw, in [0, 1), as an argument. It
// expects p.WithDefaults() so that tests can pin every draw.
func (p *RetryPolicy) backoff(retry int, draw float64) time.Duration {
	retry = max(retry, 0)
	maxDelay := float64(p.MaxDelay)
	// In float64, so a large retry number saturates instead of overflowing.
	base := math.Min(float64(p.InitialDelay)*math.Pow(p.Multiplier, float64(retry)), maxDelay)
	var d float64
	switch p.Jitter {
	case JitterFull:
		d = base * draw
	case JitterProportional:
		// Draw from [base(1-f), base(1+f)], with the top held at MaxDelay so
		// that delays at the cap stay spread rather than pile up on it.
		lo := base * (1 - p.JitterFraction)
		hi := math.Min(base*(1+p.JitterFraction), maxDelay)
		d = lo + (hi-lo)*draw
	default:
		d = base
	}
	// float64(MaxDelay) may round up past it, and past MaxInt64 near the
	// top, where the conversion would wrap negative.
	if d >= maxDelay {
		return p.MaxDelay
	}
	return time.Duration(max(d, 0))
}

// This file holds ready configurations: three presets of the whole stack
// for APIs whose limits are unknown. The published limits of named APIs
// are in package providers.
//
// The presets, side by side:
//
//	                     Conservative        Moderate            Aggressive
//	MaxAttempts          4                   5 (the default)     8
//	InitialDelay         2s                  1s                  250ms
//	MaxDelay             1m                  30s                 10s
//	TotalWaitCap         5m                  2m                  1m
//	retry budget         10% + 2/s           20% + 10/s          50% + 20/s
//	limit                learned (the        learned             learned
//	                     default), 4 in flight
//	breaker trips after  5 failures          5 failures          10 failures
//	breaker cooldown     2m, then 10m, 1h    1m                  15s
//
// A breaker's failures are rate-limit events (a burst of 429s is one),
// 5xx and network errors.

// Preset is a configuration of the whole stack: a retry policy, limit
// scopes and a breaker. Give it to [New] with [WithPreset]; options after it
// add to it or replace its parts (a later WithRetry wins). Every preset
// learns each host's limit, as New does, and no preset's breaker opens on a
// server that only limits its rate (see "Breakers" in the package doc).
type Preset struct {
	Name    string
	Retry   RetryPolicy
	Limits  []Limit
	Breaker *BreakerPolicy // nil: no breaker
}

// WithPreset applies p: its retry policy, each of its limits, and its
// breaker.
func WithPreset(p Preset) Option {
	return func(t *Transport) {
		WithRetry(p.Retry)(t)
		for _, l := range p.Limits {
			WithLimit(l)(t)
		}
		if p.Breaker != nil {
			WithBreaker(*p.Breaker)(t)
		}
	}
}

// Conservative is for an API that must not be annoyed, or a background
// job with time to spare: few attempts, long waits, a small retry budget,
// at most four requests in flight per host, and a breaker that stays open
// long, and longer each time its probe fails. Its four attempts and five
// failures in a row ride out a server that fails one request in twenty
// behind its limiter, with every call completed.
func Conservative() Preset {
	return Preset{
		Name: "conservative",
		Retry: RetryPolicy{MaxAttempts: 4, InitialDelay: 2 * time.Second, MaxDelay: time.Minute,
			TotalWaitCap: 5 * time.Minute, RetryBudget: 0.1, RetryBudgetFloor: 2},
		Limits: []Limit{{Name: "in flight", MaxConcurrent: 4}},
		Breaker: &BreakerPolicy{ConsecutiveFailures: 5, Cooldown: 2 * time.Minute,
			Escalation: []time.Duration{10 * time.Minute, time.Hour}},
	}
}

// Moderate is the default policy, the learned pace and the default
// breaker: the preset to start from for an API whose limits you do not
// know.
func Moderate() Preset {
	return Preset{
		Name:    "moderate",
		Retry:   DefaultRetryPolicy(),
		Breaker: &BreakerPolicy{},
	}
}

// Aggressive is for a user waiting on the answer of an API that recovers
// fast: more attempts, short waits, a large retry budget, the learned pace
// and a breaker that trips late and tries again soon.
func Aggressive() Preset {
	return Preset{
		Name: "aggressive",
		Retry: RetryPolicy{MaxAttempts: 8, InitialDelay: 250 * time.Millisecond, MaxDelay: 10 * time.Second,
			TotalWaitCap: time.Minute, RetryBudget: 0.5, RetryBudgetFloor: 20},
		Breaker: &BreakerPolicy{ConsecutiveFailures: 10, Cooldown: 15 * time.Second},
	}
}
