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
// already have one: CheckRetry retries what p reads as rate-limited or
// retryable, and idempotent methods after network errors; Backoff is p's
// jittered backoff raised to the server's wait hint. Wire it in with
// client.CheckRetry, client.Backoff = ratewise.RetryablehttpPolicy(p); see
// "go-retryablehttp" in the package doc for the rest of the wiring and
// what retryablehttp's hooks leave out.
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
		if class := p.classify(resp, resp.Request); class == Final || class == Blocked {
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
