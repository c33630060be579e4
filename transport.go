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
		t.retry = p.WithDefaults()
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
// classify and decide, until a response is final or nothing is left to try
// with. Both kinds of failed attempt, a response to retry and a network
// error, meet in one decision (planRetry), so that what must hold before a
// wait starts is checked in one place.
func (c *call) run() (*http.Response, error) {
	if err := c.prepareBody(); err != nil {
		return nil, err
	}
	c.stats = callStatsFrom(c.ctx)
	for {
		resp, err := c.send()
		var delay time.Duration
		if err != nil {
			if final := c.refuseNetworkRetry(err); final != nil {
				return nil, final
			}
			delay = c.policy.Backoff(c.attempts - 1)
		} else {
			class := c.policy.classify(resp)
			c.stats.recordResponse(resp.StatusCode, class)
			if class == Final || c.attempts >= c.policy.MaxAttempts || !c.replayable {
				return resp, nil
			}
			delay = c.responseDelay(resp)
		}

		next, refused := c.planRetry(delay)
		if refused != nil {
			if resp != nil {
				return resp, nil // the last response is the answer, untouched
			}
			return nil, fmt.Errorf("ratewise: giving up after %d attempts, %w: %w", c.attempts, refused, err)
		}
		if resp != nil {
			drainAndClose(resp.Body)
		}
		if err := c.wait(delay); err != nil {
			closeRequestBody(next)
			return nil, err
		}
		c.out = next
	}
}

// send makes one attempt through the base RoundTripper.
func (c *call) send() (*http.Response, error) {
	c.attempts++
	c.stats.recordAttempt()
	resp, err := c.t.base.RoundTrip(c.out)
	if err == nil && resp == nil {
		return nil, errNoResponse
	}
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close() // a broken base returned both; keep the contract
		}
		return nil, err
	}
	return resp, nil
}

var errNoResponse = errors.New("ratewise: base RoundTripper returned neither a response nor an error")

// responseDelay is the wait before retrying after resp: the policy's
// jittered backoff, raised to the server's hint unless IgnoreRetryAfter.
func (c *call) responseDelay(resp *http.Response) time.Duration {
	delay := c.policy.Backoff(c.attempts - 1)
	if !c.policy.IgnoreRetryAfter {
		if hint, ok := WaitHint(resp, time.Now()); ok && hint > delay {
			delay = hint
		}
	}
	return delay
}

// refuseNetworkRetry returns nil when the attempt that failed with err may
// be tried again, and otherwise the error the call ends with: the context's
// when it is done, the base's when the request is not idempotent, the
// error is permanent, or the retries are spent.
func (c *call) refuseNetworkRetry(err error) error {
	if ctxErr := c.ctx.Err(); ctxErr != nil {
		if errors.Is(err, ctxErr) {
			return err
		}
		return fmt.Errorf("%w: %w", ctxErr, err)
	}
	c.networkRetries++
	limit := max(c.policy.NetworkRetries, 0) // NoNetworkRetries is -1
	if c.networkRetries <= limit && c.attempts < c.policy.MaxAttempts && c.replayable &&
		isIdempotent(c.req) && err != errNoResponse && !isPermanent(err) {
		return nil
	}
	if c.attempts > 1 {
		return fmt.Errorf("ratewise: giving up after %d attempts: %w", c.attempts, err)
	}
	return err
}

// planRetry commits to a retry after delay: it takes the wait from the
// budget and gets a fresh body for the next request. When either fails it
// takes nothing and returns why.
func (c *call) planRetry(delay time.Duration) (*http.Request, error) {
	if err := c.reserve(delay); err != nil {
		return nil, err
	}
	next, err := c.nextRequest()
	if err != nil {
		c.giveBack(delay)
		return nil, fmt.Errorf("cannot get the request body again: %w", err)
	}
	return next, nil
}

// isPermanent reports whether a network error is one that retrying cannot
// fix (an untrusted certificate, an unsupported scheme, an invalid header,
// a redirect loop), by go-retryablehttp's classification. That
// classification reads only the *url.Error an http.Client returns and the
// error right under it, so each error of the wrap chain is shown to it in
// turn, as a *url.Error (its URL left out: only the cause is read). A
// certificate error under a proxy's or another RoundTripper's wrapping is
// then found too.
func isPermanent(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		uerr, ok := e.(*url.Error)
		if !ok {
			uerr = &url.Error{Op: "Do", Err: e}
		}
		if retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), nil, uerr); !retry {
			return true
		}
	}
	return false
}

// reserve takes a wait of d from the call's budget. It refuses, taking
// nothing, a wait that does not fit in the budget left (ErrBudgetExhausted)
// or that would last until the context's deadline, leaving no time to send
// (context.DeadlineExceeded).
func (c *call) reserve(d time.Duration) error {
	d = max(d, 0)
	if deadline, ok := c.ctx.Deadline(); ok && time.Until(deadline) <= d {
		return fmt.Errorf("next wait of %v would reach the context deadline: %w", d, context.DeadlineExceeded)
	}
	if !c.budgetFound {
		c.budgetFound = true
		if c.shared = budgetFrom(c.ctx); c.shared == nil {
			c.waitLeft = c.policy.TotalWaitCap
		}
	}
	if c.shared != nil {
		if !c.shared.take(d) {
			return fmt.Errorf("next wait of %v does not fit: %w", d, ErrBudgetExhausted)
		}
		return nil
	}
	if d > c.waitLeft {
		return fmt.Errorf("next wait of %v does not fit: %w", d, ErrBudgetExhausted)
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
	if d <= 0 {
		return
	}
	if c.shared != nil {
		c.shared.giveBack(d)
	} else {
		c.waitLeft += d
	}
}
