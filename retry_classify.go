package ratewise

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
)

// This file reads a response for the retry policy: its Class, by status
// and headers (DefaultClassify, or a Classify hook), then by the body
// rules (BlockPhrases, RateLimitPhrases, ClassifyBody).

// Class is the retry layer's reading of one response.
type Class uint8

const (
	// Final hands the response back to the caller as it is: successes,
	// client errors, and server errors of requests that may not be
	// repeated or that another attempt will not fix (501, 505).
	Final Class = iota
	// RateLimited means the server refused the request for rate. It is
	// retried after the server's wait hint (Retry-After and the reset
	// headers) or the policy's backoff, whichever is longer.
	RateLimited
	// Retryable is a transient failure worth another attempt after backoff
	// (the answer's Retry-After still raises the delay; a spent quota's
	// reset beside it does not, the pace keeps it): by default, a 500, 502,
	// 503, 504 or 408 answering a request that may be repeated.
	Retryable
	// Blocked means the server refused the client in a way that retrying
	// soon will not fix, such as an anti-bot page served with 200 ("Sign
	// in to confirm you're not a bot"). It counts as a rate-limit event
	// for the breaker, the pause gate and the learned pace, as
	// RateLimited does, but is not retried: the response is final, its
	// call gives up (GiveUpBlocked), and [CheckResponse] reports it as a
	// *RateLimitError. [RetryPolicy.BlockPhrases] return it; so may a
	// Classify or ClassifyBody hook.
	Blocked
)

// String returns the class's name: "final", "rate-limited",
// "retryable" or "blocked".
func (c Class) String() string {
	switch c {
	case Final:
		return "final"
	case RateLimited:
		return "rate-limited"
	case Retryable:
		return "retryable"
	case Blocked:
		return "blocked"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// refusal reports whether the class is a refusal of the client for rate:
// RateLimited, or Blocked.
func (c Class) refusal() bool { return c == RateLimited || c == Blocked }

// MarshalText writes the class's name, for JSON.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// DefaultClassify is the classification used when [RetryPolicy.Classify]
// is nil: 429, a 503 carrying Retry-After, and a 403 carrying Retry-After
// or X-RateLimit-Remaining: 0 (GitHub's limits) are RateLimited; a
// transient server error (500, 502, 503, 504) or a 408 is Retryable when
// its request may be sent again (an idempotent method of RFC 9110, or an
// Idempotency-Key header), as go-retryablehttp, the AWS SDKs and .NET's
// resilience handler retry them; everything else, a POST's 503 among
// them, is Final. It reads no body: GitHub's secondary limits that say so
// only in the body are caught by RateLimitPhrases. A Classify hook may
// call it for the cases it does not handle; [FinalServerErrors] is the
// classification of earlier versions, which retried no bare 5xx.
func DefaultClassify(resp *http.Response) Class {
	return defaultClassify(resp, resp.Request)
}

// defaultClassify is DefaultClassify of a response to req, which a base
// transport may not have set as resp.Request.
func defaultClassify(resp *http.Response, req *http.Request) Class {
	if headers.RateLimited(resp) {
		return RateLimited
	}
	if transientStatus(resp.StatusCode) && req != nil && isIdempotent(req) {
		return Retryable
	}
	return Final
}

// FinalServerErrors is [DefaultClassify] with every server error Final,
// as ratewise classified them before v0.1.0: for a Classify hook of a
// caller that retries 5xx answers itself.
//
//	policy := ratewise.RetryPolicy{Classify: ratewise.FinalServerErrors}
func FinalServerErrors(resp *http.Response) Class {
	if class := DefaultClassify(resp); class != Retryable {
		return class
	}
	return Final
}

// transientStatus reports whether status is a server error that another
// attempt may not meet, or a 408: what every retrying peer retries.
func transientStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// classify reads resp, the answer to req, with p's hooks and body rules.
// A rule peeks at the body and puts it back, so that the caller still
// reads it in full; a policy with none reads nothing of it.
func (p *RetryPolicy) classify(resp *http.Response, req *http.Request) Class {
	if p.Classify == nil && is2xx(resp.StatusCode) && len(p.BlockPhrases) == 0 && p.ClassifyBody == nil {
		// What DefaultClassify and the body rules say of a success, the
		// most of the answers: Final, with no header nor body to read.
		return Final
	}
	var class Class
	if p.Classify != nil {
		class = p.Classify(resp)
	} else {
		class = defaultClassify(resp, req)
	}
	if class != Final && class != Retryable || !p.readsBody(resp.StatusCode) {
		return class
	}
	return p.classifyBody(resp, peekBody(resp, peekLimit), class)
}

// readsBody reports whether a body rule may read the body of a response
// of status.
func (p *RetryPolicy) readsBody(status int) bool {
	return len(p.BlockPhrases) > 0 || p.ClassifyBody != nil || len(p.RateLimitPhrases) > 0 && !is2xx(status)
}

// classifyBody applies the body rules to head, the start of resp's body;
// class, what the status and headers said, stands when no rule says
// more.
func (p *RetryPolicy) classifyBody(resp *http.Response, head []byte, class Class) Class {
	var folded string // head folded for the phrases, once
	matches := func(phrases []string) bool {
		if len(phrases) == 0 || len(head) == 0 {
			return false
		}
		if folded == "" {
			folded = foldPhrase(string(head))
		}
		return containsAnyFolded(folded, phrases)
	}
	switch {
	case matches(p.BlockPhrases):
		return Blocked
	case !is2xx(resp.StatusCode) && matches(p.RateLimitPhrases):
		return RateLimited
	case p.ClassifyBody != nil:
		if hooked := p.ClassifyBody(resp, head); hooked != Final {
			return hooked
		}
	}
	return class
}

func is2xx(status int) bool { return status >= 200 && status <= 299 }

// CheckResponse is [CheckResponse] with p's classification: it returns a
// *RateLimitError when p's Classify hook or body rules read resp as
// RateLimited or Blocked, and nil otherwise.
func (p RetryPolicy) CheckResponse(resp *http.Response) error {
	if resp == nil {
		return nil
	}
	if class := p.classify(resp, resp.Request); class.refusal() {
		return newRateLimitError(resp, class)
	}
	return nil
}

// apostrophes are the spellings of an apostrophe that a phrase matches
// as one: typographic ones, and those of HTML and JSON text.
var apostrophes = strings.NewReplacer("’", "'", "‘", "'", "ʼ", "'", "′", "'",
	"&#39;", "'", "&#039;", "'", "&#x27;", "'", "&#X27;", "'", "&apos;", "'", "&rsquo;", "'", "&lsquo;", "'",
	"&#8217;", "'", "&#x2019;", "'", `\u0027`, "'", `\u2019`, "'")

// foldPhrase is s as phrases are matched: lower case, every apostrophe
// written '.
func foldPhrase(s string) string {
	return strings.ToLower(apostrophes.Replace(s))
}

// containsAnyFolded reports whether folded, a folded body, holds one of
// phrases.
func containsAnyFolded(folded string, phrases []string) bool {
	for _, phrase := range phrases {
		if phrase = strings.TrimSpace(phrase); phrase != "" && strings.Contains(folded, foldPhrase(phrase)) {
			return true
		}
	}
	return false
}

// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) as a
// wait from now: delta-seconds, an HTTP-date in any of RFC 9110's three
// forms, and, leniently, decimal seconds ("1.5") and "UTC" for "GMT". A
// date in the past is a wait of 0. It reports false for anything else:
// empty or malformed values, signs, exponents, NaN, and waits too long for
// a time.Duration.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	return headers.ParseRetryAfter(value, now)
}

// WaitHint returns how long resp asks the client to wait before the next
// request: Retry-After-Ms, Retry-After ([ParseRetryAfter]), then the reset
// of a spent quota in the IETF RateLimit headers, X-RateLimit-*, OpenAI's
// and Anthropic's per-resource resets, and a minute for GitHub's secondary
// limits; the first valid one wins. A reset whose remaining count is above
// zero is skipped. It reports false when no header gives a valid wait. See
// "Wait hints" in the package doc for each form.
func WaitHint(resp *http.Response, now time.Time) (time.Duration, bool) {
	return headers.WaitHint(resp, now)
}

// markClass puts ClassHeader on a final response that class reads as a
// refusal where DefaultClassify does not. The header map is copied
// first: a base may hand out one map in several responses.
func markClass(resp *http.Response, class Class) {
	if class.refusal() { // inlined: most responses are no refusal
		markRefusal(resp, class)
	}
}

// markRefusal is markClass of a refusal.
func markRefusal(resp *http.Response, class Class) {
	if DefaultClassify(resp) == RateLimited {
		return
	}
	h := resp.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(ClassHeader, class.String())
	resp.Header = h
}
