package ratewise

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
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
	// Class is RateLimited, or Blocked for a refusal that retrying soon
	// will not fix (see [Blocked]).
	Class Class
}

// Error describes the refusal, the attempts and the wait the server asked
// for. It leaves out the URL, which may carry credentials.
func (e *RateLimitError) Error() string {
	var b strings.Builder
	what := "rate limited"
	if e.Class == Blocked {
		what = "blocked by the server"
	}
	fmt.Fprintf(&b, "ratewise: %s (%d %s)", what, e.StatusCode, http.StatusText(e.StatusCode))
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

// ClassHeader is the header a [Transport] adds to a final response that
// its retry policy read as a refusal, RateLimited or Blocked, when
// [DefaultClassify] alone would not: a body rule matched, or a Classify
// hook said so. Its value is the class's name ("blocked",
// "rate-limited"); [CheckResponse] reads it. The response's other
// headers and its body are as the server sent them.
const ClassHeader = "Ratewise-Class"

// CheckResponse returns a *RateLimitError when resp is a refusal for rate
// (rate-limited by [DefaultClassify], or marked RateLimited or Blocked by
// the transport's policy, see [ClassHeader]), and nil otherwise, nil resp
// included. The transport returns such a response with a nil error, as
// [http.RoundTripper] requires; CheckResponse is for callers who would
// rather handle an error. The body stays readable in full.
func CheckResponse(resp *http.Response) error {
	if resp == nil {
		return nil
	}
	class := DefaultClassify(resp)
	if class != RateLimited {
		class = markedClass(resp)
	}
	if !class.refusal() {
		return nil
	}
	return newRateLimitError(resp, class)
}

// markedClass is the class ClassHeader names on resp, Final when none.
func markedClass(resp *http.Response) Class {
	switch resp.Header.Get(ClassHeader) {
	case "blocked":
		return Blocked
	case "rate-limited":
		return RateLimited
	}
	return Final
}

func newRateLimitError(resp *http.Response, class Class) *RateLimitError {
	e := &RateLimitError{
		StatusCode: resp.StatusCode,
		RawBody:    string(peekBody(resp, peekLimit)),
		Class:      class,
	}
	e.RetryAfter, e.HasRetryAfter = headers.WaitHint(resp, time.Now())
	if resp.Request != nil {
		if s := callStatsFrom(resp.Request.Context()); s != nil {
			e.Attempts = s.Attempts()
		}
	}
	return e
}
