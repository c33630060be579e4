package ratewise

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// Transport is an [http.RoundTripper] that sends each request through its
// base RoundTripper and retries it, per its [RetryPolicy], when the server
// refuses it for rate or the network fails an idempotent request. Create
// one with [New]. It is safe for concurrent use, and its zero value is not
// usable.
type Transport struct {
	base  http.RoundTripper
	retry RetryPolicy // with defaults filled in
	// err is the first invalid option; every RoundTrip returns it so that
	// a bad configuration is loud rather than silently replaced.
	err error
}

var _ http.RoundTripper = (*Transport)(nil)

// errNoURL rejects at once a request that no base could send, rather than
// retrying the base's error.
var errNoURL = errors.New("ratewise: request has no URL")

// Option configures a [Transport] in [New].
type Option func(*Transport)

// New returns a Transport that sends requests through base, or through
// [http.DefaultTransport] when base is nil. Without options it retries with
// [DefaultRetryPolicy]. An invalid option makes every RoundTrip return an
// error naming the bad fields; check policies with [RetryPolicy.Validate]
// to catch that at start-up.
func New(base http.RoundTripper, opts ...Option) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, retry: DefaultRetryPolicy()}
	for _, opt := range opts {
		if opt != nil {
			opt(t)
		}
	}
	return t
}

// WithRetry sets the retry policy; zero fields take their defaults. A
// policy with MaxAttempts 1 turns retries off.
func WithRetry(p RetryPolicy) Option {
	return func(t *Transport) {
		if err := p.Validate(); err != nil {
			t.err = errors.Join(t.err, err)
			return
		}
		p.RateLimitPhrases = slices.Clone(p.RateLimitPhrases)
		t.retry = p.withDefaults()
	}
}

// CloseIdleConnections closes the idle connections of the base
// RoundTripper, when it has a CloseIdleConnections method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req, retrying it as the policy allows, and returns the
// final response with a nil error, whatever its status. It returns an error
// only when no response was obtained: a network failure, a cancelled
// context, or a wait budget spent before any response came. It does not
// modify req; retries send shallow copies carrying a fresh body.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.err != nil {
		closeRequestBody(req)
		return nil, t.err
	}
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errNoURL
	}
	c := call{t: t, policy: &t.retry, req: req, out: req, ctx: req.Context()}
	return c.run()
}

// call is the state of one RoundTrip. It lives on RoundTrip's stack, so a
// request that is not retried allocates nothing for it.
type call struct {
	t      *Transport
	policy *RetryPolicy
	req    *http.Request // the caller's request, never modified
	out    *http.Request // what the next attempt sends
	ctx    context.Context
	stats  *CallStats

	// How the body is sent again: req.GetBody, or bodyData when buffered;
	// replayable is false for a body that can be sent once only.
	replayable bool
	buffered   bool
	bodyData   []byte

	attempts       int
	networkRetries int
	// The wait budget, found at the first wait: shared through the
	// context, or else the policy's TotalWaitCap, of which waitLeft remains.
	budgetFound bool
	shared      *budget
	waitLeft    time.Duration
}

// run is the attempt loop of the pipeline: prepare the body, then send,
// classify, and decide, until a response is final or nothing is left to
// try with.
func (c *call) run() (*http.Response, error) {
	if err := c.prepareBody(); err != nil {
		return nil, err
	}
	c.stats = callStatsFrom(c.ctx)
	for {
		c.attempts++
		c.stats.recordAttempt()
		resp, err := c.t.base.RoundTrip(c.out)
		if err == nil && resp == nil {
			err = errors.New("ratewise: base RoundTripper returned neither a response nor an error")
		}
		if err != nil {
			if resp != nil && resp.Body != nil { // a broken base; keep the contract
				_ = resp.Body.Close()
			}
			if err = c.afterNetworkError(err); err != nil {
				return nil, err
			}
			continue
		}

		class := c.policy.classify(resp)
		c.stats.recordResponse(resp.StatusCode, class)
		if class == Final {
			return resp, nil
		}
		delay, retry := c.retryDelay(resp)
		if !retry {
			return resp, nil
		}
		next, err := c.nextRequest()
		if err != nil {
			return resp, nil // the body cannot be sent again: this response is the answer
		}
		drainAndClose(resp.Body)
		if err := c.wait(delay); err != nil {
			closeRequestBody(next)
			return nil, err
		}
		c.out = next
	}
}

// retryDelay decides whether a rate-limited or retryable response is tried
// again, and after how long: the policy's jittered backoff, raised to the
// server's hint unless IgnoreRetryAfter. It takes the wait from the budget.
func (c *call) retryDelay(resp *http.Response) (time.Duration, bool) {
	if c.attempts >= c.policy.MaxAttempts || !c.replayable {
		return 0, false
	}
	delay := c.policy.Backoff(c.attempts - 1)
	if !c.policy.IgnoreRetryAfter {
		if hint, ok := WaitHint(resp, time.Now()); ok && hint > delay {
			delay = hint
		}
	}
	if c.reserve(delay) != nil {
		return 0, false
	}
	return delay, true
}

// afterNetworkError returns nil when the attempt that failed with err is to
// be tried again, after waiting; otherwise the error to return.
func (c *call) afterNetworkError(err error) error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return err
		}
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	c.networkRetries++
	limit := c.policy.NetworkRetries
	if limit == NoNetworkRetries {
		limit = 0
	}
	if c.networkRetries > limit || c.attempts >= c.policy.MaxAttempts ||
		!c.replayable || !isIdempotent(c.req) || isPermanent(err) {
		if c.attempts > 1 {
			return fmt.Errorf("ratewise: giving up after %d attempts: %w", c.attempts, err)
		}
		return err
	}
	delay := c.policy.Backoff(c.attempts - 1)
	if reason := c.reserve(delay); reason != nil {
		return fmt.Errorf("ratewise: giving up after %d attempts, next wait of %v does not fit: %w: %w", c.attempts, delay, reason, err)
	}
	next, bodyErr := c.nextRequest()
	if bodyErr != nil {
		return fmt.Errorf("ratewise: cannot send the body again (%w): %w", bodyErr, err)
	}
	if waitErr := c.wait(delay); waitErr != nil {
		closeRequestBody(next)
		return waitErr
	}
	c.out = next
	return nil
}

// isPermanent reports whether a network error is one that retrying cannot
// fix (an untrusted certificate, an unsupported scheme, an invalid header,
// a redirect loop), by go-retryablehttp's classification. That
// classification expects the *url.Error an http.Client returns, so a bare
// transport error is wrapped as one (its URL left out: only the cause is
// read).
func isPermanent(err error) bool {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		uerr = &url.Error{Op: "Do", Err: err}
	}
	retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), nil, uerr)
	return !retry
}

// reserve takes a wait of d from the call's budget. It returns
// ErrBudgetExhausted when d does not fit in the budget left, or
// context.DeadlineExceeded when the wait would outlive the context's
// deadline; a wait refused is not taken.
func (c *call) reserve(d time.Duration) error {
	if deadline, ok := c.ctx.Deadline(); ok && time.Until(deadline) < d {
		return context.DeadlineExceeded
	}
	if !c.budgetFound {
		c.budgetFound = true
		if c.shared = budgetFrom(c.ctx); c.shared == nil {
			c.waitLeft = c.policy.TotalWaitCap
		}
	}
	if c.shared != nil {
		if !c.shared.take(d) {
			return ErrBudgetExhausted
		}
		return nil
	}
	if d > c.waitLeft {
		return ErrBudgetExhausted
	}
	c.waitLeft -= d
	return nil
}

// wait sleeps for d, already reserved, or until the context ends. A wait
// cut short gives the unused part back to a shared budget.
func (c *call) wait(d time.Duration) error {
	if err := c.ctx.Err(); err != nil {
		c.giveBack(d)
		return err
	}
	if d <= 0 {
		return nil
	}
	start := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		c.stats.recordWait(d)
		return nil
	case <-c.ctx.Done():
		waited := time.Since(start)
		c.stats.recordWait(waited)
		c.giveBack(d - waited)
		return c.ctx.Err()
	}
}

func (c *call) giveBack(d time.Duration) {
	if c.shared != nil {
		c.shared.giveBack(d)
	} else {
		c.waitLeft += d
	}
}
