package kanbanize

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ratewise/ratewise"
)

var (
	// ErrNotFound matches an *APIError for a card, or path, that does not
	// exist (404).
	ErrNotFound = errors.New("kanbanize: not found")
	// ErrUnauthorized matches an *APIError for a missing or wrong API key
	// (401).
	ErrUnauthorized = errors.New("kanbanize: unauthorized")
	// ErrRateLimited matches an *APIError that refused the request for rate:
	// status 429, or error code RL02 whatever the status. So does
	// ratewise.ErrRateLimited.
	ErrRateLimited = errors.New("kanbanize: rate limited")
)

// APIError is an error answer of the API: its status and the code,
// message and reference of its body
// {"error":{"code":…,"message":…,"reference":…}}.
type APIError struct {
	StatusCode int
	Code       string
	Message    string
	Reference  string
	// RetryAfter is the wait the answer asked for, when it said.
	RetryAfter time.Duration
}

// Error describes the answer; it never holds the API key, which is sent in
// a header the server does not echo.
func (e *APIError) Error() string { return "kanbanize: " + e.summary() }

// summary is the answer in a few words: "404 Not Found (CA01): Card not found.".
func (e *APIError) summary() string {
	msg := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is matches ErrNotFound, ErrUnauthorized, ErrRateLimited and
// ratewise.ErrRateLimited by the status and code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrRateLimited, ratewise.ErrRateLimited:
		return e.RateLimited()
	}
	return false
}

// RateLimited reports whether the answer refused the request for rate.
func (e *APIError) RateLimited() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.Code == codeRateLimitedOtherwise
}

// codeRateLimitedOtherwise is how some accounts say "rate limited" with
// another status than 429.
const codeRateLimitedOtherwise = "RL02"

// maxErrorBody bounds what is read of an error answer.
const maxErrorBody = 64 << 10

// newAPIError reads an error answer. A body that is empty or not the API's
// error JSON (a 503 from a proxy) leaves Code and Message empty.
func newAPIError(resp *http.Response) *APIError {
	e := &APIError{StatusCode: resp.StatusCode}
	e.RetryAfter, _ = ratewise.WaitHint(resp, time.Now())
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var parsed struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			Reference string `json:"reference"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &parsed) == nil {
		e.Code, e.Message, e.Reference = parsed.Error.Code, parsed.Error.Message, parsed.Error.Reference
	}
	return e
}
