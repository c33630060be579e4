package ratewise

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

var (
	// ErrRateLimited matches every *RateLimitError with errors.Is.
	ErrRateLimited = errors.New("ratewise: rate limited")
	// ErrBudgetExhausted marks a call that ended without a response because
	// its next wait did not fit in the wait budget left.
	ErrBudgetExhausted = errors.New("ratewise: wait budget exhausted")
	// ErrRetryBudgetExhausted marks a call that ended after a network
	// error because its host's retry budget ([RetryPolicy.RetryBudget])
	// had no retry left.
	ErrRetryBudgetExhausted = errors.New("ratewise: retry budget exhausted")
)

// RateLimitError describes a final response that the server refused for
// rate, for callers who want an error rather than a status code; see
// [CheckResponse].
type RateLimitError struct {
	// StatusCode is the response's status, usually 429.
	StatusCode int
	// RetryAfter is the wait the server asked for (see [WaitHint]); 0 when
	// it gave none, in which case HasRetryAfter is false.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// RawBody is the start of the response body, at most 4 KiB, for
	// diagnostics. The body itself is left readable in full.
	RawBody string
	// Attempts is the attempt count of the [CallStats] that the request's
	// context carries (all the calls made with that context), and 0 when
	// it carries none.
	Attempts int
}

// Error describes the refusal, the attempts and the wait the server asked
// for. It leaves out the URL, which may carry credentials.
func (e *RateLimitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ratewise: rate limited (%d %s)", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Attempts > 0 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.HasRetryAfter {
		fmt.Fprintf(&b, "; server asked to wait %v", e.RetryAfter)
	}
	return b.String()
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// CheckResponse returns a *RateLimitError when resp is rate-limited by
// [DefaultClassify] (429; 503 with Retry-After; 403 with Retry-After or
// X-RateLimit-Remaining: 0), and nil otherwise, nil resp included. The
// transport returns such a final response with a nil error, as
// [http.RoundTripper] requires; CheckResponse is for callers who would
// rather handle an error. The body stays readable in full. For a
// policy with its own Classify or RateLimitPhrases, use
// [RetryPolicy.CheckResponse].
func CheckResponse(resp *http.Response) error {
	if resp == nil || DefaultClassify(resp) != RateLimited {
		return nil
	}
	return newRateLimitError(resp)
}

func newRateLimitError(resp *http.Response) *RateLimitError {
	e := &RateLimitError{
		StatusCode: resp.StatusCode,
		RawBody:    string(peekBody(resp, peekLimit)),
	}
	e.RetryAfter, e.HasRetryAfter = WaitHint(resp, time.Now())
	if resp.Request != nil {
		if s := callStatsFrom(resp.Request.Context()); s != nil {
			e.Attempts = s.Attempts()
		}
	}
	return e
}
