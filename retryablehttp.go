package ratewise

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/ratewise/ratewise/internal/headers"
)

// RetryablehttpPolicy adapts p for a [retryablehttp.Client], for teams that
// already have one: the CheckRetry retries what p reads as rate-limited or
// retryable (by default 429, and 503 or 403 with a rate-limit signal, see
// [DefaultClassify]; never what it reads as Blocked) and, after network errors, idempotent methods only,
// never permanent errors; the Backoff is p's jittered backoff, raised to
// the server's Retry-After or reset hint (see [WaitHint]) unless
// p.IgnoreRetryAfter. Wire it in with
//
//	client.CheckRetry, client.Backoff = ratewise.RetryablehttpPolicy(p)
//	client.RetryMax = p.WithDefaults().MaxAttempts - 1 // retryablehttp counts retries
//	client.ErrorHandler = retryablehttp.PassthroughErrorHandler // keep the last response
//
// Backoff ignores the client's RetryWaitMin and RetryWaitMax: p's delays
// apply. Three things of the Transport have no place in retryablehttp's
// hooks: the total wait cap (a hint longer than p.TotalWaitCap only stops
// the retries), the separate NetworkRetries limit, and the Idempotency-Key
// header (the method alone decides). Use a context deadline to bound the
// whole call.
func RetryablehttpPolicy(p RetryPolicy) (retryablehttp.CheckRetry, retryablehttp.Backoff) {
	p = p.WithDefaults()
	p.RateLimitPhrases = slices.Clone(p.RateLimitPhrases)
	p.BlockPhrases = slices.Clone(p.BlockPhrases)
	checkRetry := func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if err != nil {
			return retryableNetworkError(err), nil
		}
		if resp == nil {
			return false, nil
		}
		if class := p.classify(resp); class == Final || class == Blocked {
			return false, nil
		}
		if hint, ok := headers.WaitHint(resp, time.Now()); ok && !p.IgnoreRetryAfter && hint > p.TotalWaitCap {
			return false, nil // the server asks for longer than we would ever wait
		}
		return true, nil
	}
	backoff := func(_, _ time.Duration, attemptNum int, resp *http.Response) time.Duration {
		delay := p.Backoff(attemptNum)
		if resp != nil && !p.IgnoreRetryAfter {
			if hint, ok := headers.WaitHint(resp, time.Now()); ok && hint > delay {
				delay = hint
			}
		}
		return delay
	}
	return checkRetry, backoff
}

// retryableNetworkError reads the *url.Error that retryablehttp's client
// hands to CheckRetry: its Op is the request method ("Get", "Post"), which
// decides idempotency, and its cause decides permanence.
func retryableNetworkError(err error) bool {
	var uerr *url.Error
	if !errors.As(err, &uerr) {
		return false // not from an HTTP exchange: nothing known to retry
	}
	return isIdempotent(&http.Request{Method: strings.ToUpper(uerr.Op)}) && !isPermanent(uerr)
}
