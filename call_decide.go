package ratewise

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// This file decides whether a failed attempt is tried again, and after
// how long: the delay, the network errors worth a retry, and the
// commitment that takes a retry and its wait from their budgets.

// responseDelay is the wait before retrying after rep: the policy's
// jittered backoff, raised to the server's hint unless IgnoreRetryAfter,
// or unless the refusal made the attempt's told window yield: the retry
// then takes its turn in the window's spread.
func (c *call) responseDelay(rep reply) time.Duration {
	delay := c.policy.jittered(c.attempts - 1)
	if !c.policy.IgnoreRetryAfter && !c.yielded && rep.hinted {
		delay = max(delay, rep.hint)
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

// errBodyAgain marks a retry refused because the request body could not be
// had again.
var errBodyAgain = errors.New("cannot get the request body again")

// planRetry commits to a retry after delay: it takes a retry from the
// host's retry budget, the wait from the wait budget, and gets a fresh
// body for the next request. When any fails it takes nothing and returns
// why.
func (c *call) planRetry(delay time.Duration) (*http.Request, error) {
	if !c.takeRetry() {
		return nil, ErrRetryBudgetExhausted
	}
	if err := c.reserve(delay); err != nil {
		c.returnUnsentRetry()
		return nil, err
	}
	next, err := c.nextRequest()
	if err != nil {
		c.returnUnsentRetry()
		c.giveBack(delay)
		return nil, fmt.Errorf("%w: %w", errBodyAgain, err)
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

// isIdempotent reports whether req may be sent again after a network error
// left its fate unknown: RFC 9110's idempotent methods, or any method with
// an Idempotency-Key header.
func isIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}
