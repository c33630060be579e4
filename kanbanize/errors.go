package kanbanize

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/ratewise/ratewise"
)

var (
	// ErrNotFound matches an *APIError for a card, or path, that does not
	// exist (404).
	ErrNotFound = errors.New("kanbanize: not found")
	// ErrUnauthorized matches an *APIError for a missing or wrong API key
	// (401).
	ErrUnauthorized = errors.New("kanbanize: unauthorized")
	// ErrForbidden matches an *APIError for a card, or path, that the API
	// key's user has no permission to read (403): the key is valid, so
	// another key, or a change of the user's board roles, is the fix.
	ErrForbidden = errors.New("kanbanize: forbidden")
	// ErrRateLimited matches an *APIError that refused the request for rate:
	// status 429, or error code RL02 whatever the status. So does
	// ratewise.ErrRateLimited.
	ErrRateLimited = errors.New("kanbanize: rate limited")
)

// APIError is an error answer of the API: its status and the code,
// message, reference and details of its body
// {"error":{"code":…,"message":…,"reference":…,"details":…}}.
type APIError struct {
	StatusCode int
	Code       string
	Message    string
	Reference  string
	// Details is the body's "details" member as sent, such as what was
	// refused and why; nil when there is none.
	Details json.RawMessage
	// RetryAfter is the wait the answer asked for, when it said.
	RetryAfter time.Duration
}

// Error describes the answer; it never holds the API key, which is sent in
// a header the server does not echo.
func (e *APIError) Error() string { return "kanbanize: " + e.summary() }

// summary is the answer in a few words: "404 Not Found (CA01): Card not
// found.", then the details, shortened, when there are some.
func (e *APIError) summary() string {
	msg := fmt.Sprintf("%d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if d := shortDetails(e.Details); d != "" {
		msg += " (details: " + d + ")"
	}
	return msg
}

// maxDetailsShown bounds the details an error message quotes.
const maxDetailsShown = 200

// shortDetails is details as compact JSON, cut at maxDetailsShown bytes
// on a character boundary; "" for none.
func shortDetails(details json.RawMessage) string {
	var b bytes.Buffer
	if len(details) == 0 || json.Compact(&b, details) != nil {
		return ""
	}
	s := b.String()
	if len(s) <= maxDetailsShown {
		return s
	}
	cut := maxDetailsShown
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Is matches ErrNotFound, ErrUnauthorized, ErrForbidden, ErrRateLimited
// and ratewise.ErrRateLimited by the status and code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
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
	e.readBody(body)
	return e
}

// readBody fills Code, Message, Reference and Details from the error body,
// member by member, so that one of an unexpected form (a numeric code)
// loses no other. A code or reference may be a number; an "error" that is
// a string is the message; "details": null is none.
func (e *APIError) readBody(body []byte) {
	var outer struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &outer) != nil || len(outer.Error) == 0 {
		return
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(outer.Error, &members) != nil {
		_ = json.Unmarshal(outer.Error, &e.Message) // "error":"…", or nothing
		return
	}
	text := func(name string) string {
		var t Text
		if json.Unmarshal(members[name], &t) != nil {
			return ""
		}
		return string(t)
	}
	e.Code, e.Message, e.Reference = text("code"), text("message"), text("reference")
	if d := bytes.TrimSpace(members["details"]); len(d) > 0 && string(d) != "null" {
		e.Details = d
	}
}
