package kanbanize

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/composite"
)

// Bounds of RetryOptions, far above any sensible value, so that no value
// overflows a duration.
const (
	maxAttemptsLimit = 1000
	maxMs            = 7 * 24 * 3600 * 1000
)

// Defaults of RetryOptions: a zero field means the matching constant.
const (
	DefaultMaxAttempts    = 10
	DefaultInitialDelayMs = 5000
	DefaultMaxDelayMs     = 300000
	DefaultMultiplier     = 2.0
	DefaultTotalWaitCapMs = 1200000
)

// RetryOptions are the parameters of ReadCardWithRetry, named and
// defaulted as the read_card_with_retry tool's, so that a tool server can
// decode its arguments into them. Zero fields mean their defaults; nil
// booleans mean true.
type RetryOptions struct {
	// MaxAttempts per endpoint, the first included (default 10).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// InitialDelayMs is the first backoff (default 5000).
	InitialDelayMs int `json:"initial_delay_ms,omitempty"`
	// MaxDelayMs caps one computed backoff (default 300000); a server's
	// Retry-After is honoured beyond it.
	MaxDelayMs int `json:"max_delay_ms,omitempty"`
	// Multiplier grows the backoff (default 2.0).
	Multiplier float64 `json:"multiplier,omitempty"`
	// FullJitter draws each backoff in [0, delay] (default true); false
	// draws it in delay ± 20%.
	FullJitter *bool `json:"full_jitter,omitempty"`
	// RespectRetryAfter waits at least what the server asks (default true).
	RespectRetryAfter *bool `json:"respect_retry_after,omitempty"`
	// TotalWaitCapMs bounds the time spent waiting by the three endpoints
	// together (default 1200000): the comments and subtasks waiting side by
	// side spend it once.
	TotalWaitCapMs int `json:"total_wait_cap_ms,omitempty"`
	// FailOnPartial makes a failed comments or subtasks read fail the
	// whole call (default false: the envelope reports it).
	FailOnPartial bool `json:"fail_on_partial,omitempty"`
	// Progress, when set, is told of each wait as it starts. Calls come
	// one at a time, from the goroutines of the endpoints' reads, and a
	// wait's timer starts once its call returns: Progress must not block,
	// or it lengthens that wait and holds back the others' starts. Hand
	// slow work, such as sending a notification, to another goroutine.
	Progress func(Progress) `json:"-"`
}

// Progress reports a wait of ReadCardWithRetry.
type Progress struct {
	Endpoint string        // "card", "comments" or "subtasks"
	Attempt  int           // the attempt the wait comes before, from 1
	Delay    time.Duration // the planned wait
	Kind     string        // "backoff", "pause", "pacing", "concurrency" or "breaker"
}

// Validate reports every option out of range, by its tool parameter name.
func (o RetryOptions) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("kanbanize: "+format, args...)) }
	if o.MaxAttempts < 0 || o.MaxAttempts > maxAttemptsLimit {
		bad("max_attempts (%d) must be within 1 to %d (0 means the default, %d)", o.MaxAttempts, maxAttemptsLimit, DefaultMaxAttempts)
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"initial_delay_ms", o.InitialDelayMs}, {"max_delay_ms", o.MaxDelayMs}, {"total_wait_cap_ms", o.TotalWaitCapMs}} {
		if f.value < 0 || f.value > maxMs {
			bad("%s (%d) must be within 0 to %d (a week; 0 means the default)", f.name, f.value, maxMs)
		}
	}
	if o.Multiplier != 0 && (math.IsNaN(o.Multiplier) || math.IsInf(o.Multiplier, 0) || o.Multiplier < 1) {
		bad("multiplier (%v) must be at least 1", o.Multiplier)
	}
	d := o.WithDefaults()
	if d.MaxDelayMs < d.InitialDelayMs {
		bad("max_delay_ms (%d) is below initial_delay_ms (%d)", d.MaxDelayMs, d.InitialDelayMs)
	}
	if d.TotalWaitCapMs < d.InitialDelayMs {
		bad("total_wait_cap_ms (%d) is below initial_delay_ms (%d)", d.TotalWaitCapMs, d.InitialDelayMs)
	}
	return errors.Join(errs...)
}

// WithDefaults returns o with every field left zero or nil set to its
// default, the two flags to true: the options ReadCardWithRetry uses.
func (o RetryOptions) WithDefaults() RetryOptions {
	if o.MaxAttempts == 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.InitialDelayMs == 0 {
		o.InitialDelayMs = DefaultInitialDelayMs
	}
	if o.MaxDelayMs == 0 {
		o.MaxDelayMs = DefaultMaxDelayMs
	}
	if o.Multiplier == 0 {
		o.Multiplier = DefaultMultiplier
	}
	if o.TotalWaitCapMs == 0 {
		o.TotalWaitCapMs = DefaultTotalWaitCapMs
	}
	if o.FullJitter == nil {
		o.FullJitter = ptrTo(true)
	}
	if o.RespectRetryAfter == nil {
		o.RespectRetryAfter = ptrTo(true)
	}
	return o
}

func ptrTo[T any](v T) *T { return &v }

// RetryPolicy returns the ratewise policy of the options: theirs, plus
// what Kanbanize needs. Error code RL02 counts as rate-limited whatever
// the status, and 502, 503 and 504 are retried: Kanbanize answers them
// when overloaded, often with no body.
func (o RetryOptions) RetryPolicy() ratewise.RetryPolicy {
	d := o.WithDefaults()
	p := ratewise.RetryPolicy{
		MaxAttempts:      d.MaxAttempts,
		InitialDelay:     time.Duration(d.InitialDelayMs) * time.Millisecond,
		MaxDelay:         time.Duration(d.MaxDelayMs) * time.Millisecond,
		Multiplier:       d.Multiplier,
		TotalWaitCap:     time.Duration(d.TotalWaitCapMs) * time.Millisecond,
		IgnoreRetryAfter: d.RespectRetryAfter != nil && !*d.RespectRetryAfter,
		RateLimitPhrases: []string{`"` + codeRateLimitedOtherwise + `"`}, // the error code, quoted as in the JSON
		Classify:         classify,
	}
	if d.FullJitter != nil && !*d.FullJitter {
		p.Jitter = ratewise.JitterProportional
	}
	return p
}

// classify is ratewise's default reading, with gateway errors retried.
func classify(resp *http.Response) ratewise.Class {
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if c := ratewise.DefaultClassify(resp); c != ratewise.Final {
			return c // a 503 with Retry-After stays rate-limited
		}
		return ratewise.Retryable
	}
	return ratewise.DefaultClassify(resp)
}

// Envelope is the result of ReadCardWithRetry, as the read_card_with_retry
// tool returns it.
type Envelope struct {
	CardID   string         `json:"card_id"`
	Attempts map[string]int `json:"attempts"`
	// WaitSeconds is the time during which the read waited: waits of the
	// comments and subtasks side by side count once.
	WaitSeconds float64 `json:"wait_seconds"`
	// PaceWaitSeconds is the time the reads waited for their turn in the
	// account's pace (the plan's limits, or the pace learned from the
	// API), and RefusalWaitSeconds the time they waited because the API
	// refused (backoffs, a pause it asked for, the breaker): why the read
	// waited. Each is summed over the three reads, so that waits side by
	// side count twice, unlike in WaitSeconds; absent when zero.
	PaceWaitSeconds    float64         `json:"pace_wait_seconds,omitempty"`
	RefusalWaitSeconds float64         `json:"refusal_wait_seconds,omitempty"`
	RateLimitHits      int             `json:"rate_limit_hits"`
	Completed          map[string]bool `json:"completed"`
	// PartialError says why each endpoint that failed did; absent when
	// every endpoint completed.
	PartialError map[string]string `json:"partial_error,omitempty"`
	Data         EnvelopeData      `json:"data"`
}

// EnvelopeData is what the envelope read: the card, whole, and the
// comments and subtasks, empty when their read failed.
type EnvelopeData struct {
	Title    string    `json:"title"`
	Card     *Card     `json:"card"`
	Comments []Comment `json:"comments"`
	Subtasks []Subtask `json:"subtasks"`
}

// Endpoint names, as the envelope and Progress use them.
const (
	EndpointCard     = "card"
	EndpointComments = "comments"
	EndpointSubtasks = "subtasks"
)

// ReadCardWithRetry reads a card with retries, then its comments and
// subtasks in parallel, every wait of the three under one budget
// (TotalWaitCapMs). A card that cannot be read is an error; comments or
// subtasks that cannot be are reported in the envelope's PartialError
// (and logged as event=rate_partial, see WithLogger), or are an error
// with FailOnPartial. Cancelling ctx returns at once what
// was read by then. card is a card number or URL (see ParseCardID); it
// and opts are checked before any request is sent.
func (c *Client) ReadCardWithRetry(ctx context.Context, card string, opts RetryOptions) (*Envelope, error) {
	id, err := c.cardID(card)
	if err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.WithDefaults()
	ctx = ratewise.WithRetryPolicy(ctx, o.RetryPolicy())
	var paceWaited, refusalWaited atomic.Int64 // nanoseconds, the three reads together
	ctx = ratewise.WithCallTrace(ctx, &ratewise.Trace{WaitEnded: func(w ratewise.WaitEndInfo) {
		switch w.Kind {
		case ratewise.WaitPacing, ratewise.WaitConcurrency:
			paceWaited.Add(int64(w.Waited))
		default:
			refusalWaited.Add(int64(w.Waited))
		}
	}})
	if o.Progress != nil {
		var mu sync.Mutex // the comments and subtasks wait side by side
		ctx = ratewise.WithCallTrace(ctx, &ratewise.Trace{WaitStarted: func(w ratewise.WaitInfo) {
			mu.Lock()
			defer mu.Unlock()
			o.Progress(Progress{Endpoint: w.Endpoint, Attempt: w.Attempt, Delay: w.Delay, Kind: w.Kind.String()})
		}})
	}

	env := &Envelope{CardID: id.String(), Data: EnvelopeData{Comments: []Comment{}, Subtasks: []Subtask{}}}
	var cardData Card
	var comments []Comment
	var subtasks []Subtask
	res, err := composite.Run(ctx,
		composite.Branch{Name: EndpointCard, Call: func(ctx context.Context) error { return c.get(ctx, cardPath(id), &cardData) }},
		[]composite.Branch{
			{Name: EndpointComments, Call: func(ctx context.Context) error { return c.get(ctx, cardPath(id)+"/comments", &comments) }},
			{Name: EndpointSubtasks, Call: func(ctx context.Context) error { return c.get(ctx, cardPath(id)+"/subtasks", &subtasks) }},
		},
		composite.Options{Budget: time.Duration(o.TotalWaitCapMs) * time.Millisecond, FailOnPartial: o.FailOnPartial})
	if err != nil { // the card failed, or a part did with FailOnPartial
		var errs []error
		for _, b := range res.Failed() {
			errs = append(errs, &ReadError{CardID: id.String(), Endpoint: b.Name, Attempts: b.Attempts,
				Waited: b.Waited, Reason: describe(b, o.MaxAttempts), Err: b.Err})
		}
		return nil, errors.Join(errs...)
	}

	env.Attempts = make(map[string]int, len(res.Branches))
	env.Completed = make(map[string]bool, len(res.Branches))
	for _, b := range res.Branches {
		env.Attempts[b.Name] = b.Attempts
		env.Completed[b.Name] = b.Completed
		if !b.Completed {
			if env.PartialError == nil {
				env.PartialError = map[string]string{}
			}
			env.PartialError[b.Name] = describe(b, o.MaxAttempts)
			c.logPartial(ctx, env.CardID, b, env.PartialError[b.Name])
		}
	}
	env.WaitSeconds = res.BudgetSpent.Seconds()
	env.PaceWaitSeconds = time.Duration(paceWaited.Load()).Seconds()
	env.RefusalWaitSeconds = time.Duration(refusalWaited.Load()).Seconds()
	env.RateLimitHits = res.RateLimitHits()
	env.Data.Title, env.Data.Card = cardData.Title, &cardData
	if env.Completed[EndpointComments] && comments != nil {
		env.Data.Comments = comments
	}
	if env.Completed[EndpointSubtasks] && subtasks != nil {
		env.Data.Subtasks = subtasks
	}
	return env, nil
}

// logPartial logs, at Warn, a part of the card that ReadCardWithRetry
// returns without: event=rate_partial, with the endpoint, the envelope's
// reason as error, the attempts made and the card.
func (c *Client) logPartial(ctx context.Context, cardID string, b composite.Outcome, reason string) {
	if c.log == nil || !c.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "card read without its "+b.Name,
		slog.String("event", "rate_partial"), slog.String("endpoint", b.Name), slog.String("error", reason),
		slog.Int("attempts", b.Attempts), slog.String("card_id", cardID))
}

// ReadError reports an endpoint that ReadCardWithRetry could not read,
// when that fails the call: the card, or with FailOnPartial its comments
// or subtasks.
type ReadError struct {
	CardID   string
	Endpoint string // "card", "comments" or "subtasks"
	Attempts int
	Waited   time.Duration
	// Reason is the envelope's words for it, such as
	// "max retries exceeded (429)".
	Reason string
	Err    error
}

// Error names the endpoint, the reason and the attempts.
func (e *ReadError) Error() string {
	what := "card " + e.CardID
	if e.Endpoint != EndpointCard {
		what = "the " + e.Endpoint + " of card " + e.CardID
	}
	return fmt.Sprintf("kanbanize: reading %s: %s, after %d attempts", what, e.Reason, e.Attempts)
}

// Unwrap returns the cause, an *APIError for an error answer.
func (e *ReadError) Unwrap() error { return e.Err }

// describe says in a few words why an endpoint's read failed.
func describe(o composite.Outcome, maxAttempts int) string {
	var ae *APIError
	switch {
	case errors.As(o.Err, &ae) && ae.RateLimited():
		what := fmt.Sprint(ae.StatusCode)
		if ae.Code == codeRateLimitedOtherwise {
			what = ae.Code
		}
		if o.Attempts >= maxAttempts {
			return fmt.Sprintf("max retries exceeded (%s)", what)
		}
		if ae.RetryAfter > 0 {
			return fmt.Sprintf("rate limited (%s): the server asked to wait %v, longer than the wait cap or deadline left", what, ae.RetryAfter)
		}
		return fmt.Sprintf("rate limited (%s): the wait cap or deadline is spent", what)
	case errors.As(o.Err, &ae):
		return ae.summary()
	case errors.Is(o.Err, context.Canceled):
		return "canceled"
	case errors.Is(o.Err, context.DeadlineExceeded):
		return "deadline exceeded"
	}
	return strings.TrimPrefix(o.Err.Error(), "kanbanize: ")
}
