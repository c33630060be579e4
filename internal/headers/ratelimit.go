package headers

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// This file reads the rate-limit headers of a response: the counts of the
// server's quota that the adaptive pacer follows (ReadCount), and the
// resets that WaitHint falls back on when no Retry-After says how long to
// wait. Each family below is named after the APIs that send it, with the
// spelling of their documentation; net/http keys a header by its canonical
// form, which is what the lookups use.
//
// Reading runs on every answer to a key the pacer holds, so it allocates
// nothing: values are cut, not split, and every name is a constant.

// quotaHeaders names the headers of one family that counts a quota.
type quotaHeaders struct {
	remaining, limit, reset string
	// resetAfter, when set, names a reset in seconds from now that is read
	// before reset: it does not depend on the two clocks agreeing.
	resetAfter string
}

// requestCounts are the families that count requests, read by ReadCount,
// in this order; the least remaining count among them is the one that binds.
var requestCounts = [...]quotaHeaders{
	// GitHub, Discord, Jira and most APIs: a count, the quota, and a reset
	// as seconds, a Unix time (Discord's has decimals) or, for Jira, an
	// ISO 8601 date-time; Discord adds X-RateLimit-Reset-After.
	{"X-Ratelimit-Remaining", "X-Ratelimit-Limit", "X-Ratelimit-Reset", "X-Ratelimit-Reset-After"},
	// The IETF draft's first form (draft-ietf-httpapi-ratelimit-headers
	// -00 to -06).
	{"Ratelimit-Remaining", "Ratelimit-Limit", "Ratelimit-Reset", ""},
	// OpenAI (and Azure OpenAI, Groq): requests and tokens are counted
	// apart; the reset is a Go duration ("1s", "6m0s") until the quota is
	// whole again.
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Reset-Requests", ""},
	// Anthropic: likewise, the reset an RFC 3339 date-time.
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Reset", ""},
}

// resourceResets are the families that count a resource apart from the
// rest, OpenAI's and Anthropic's requests and tokens: WaitHint waits for
// the longest reset among those spent, since a request passes only when
// every one of them has quota again. Tokens are not requests, so the
// pacer does not count them.
var resourceResets = [...]quotaHeaders{
	{"X-Ratelimit-Remaining-Requests", "", "X-Ratelimit-Reset-Requests", ""},
	{"X-Ratelimit-Remaining-Tokens", "", "X-Ratelimit-Reset-Tokens", ""},
	{"Anthropic-Ratelimit-Requests-Remaining", "", "Anthropic-Ratelimit-Requests-Reset", ""},
	{"Anthropic-Ratelimit-Tokens-Remaining", "", "Anthropic-Ratelimit-Tokens-Reset", ""},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "", "Anthropic-Ratelimit-Input-Tokens-Reset", ""},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "", "Anthropic-Ratelimit-Output-Tokens-Reset", ""},
}

// structuredFields are the headers in the IETF draft's RateLimit syntax,
// each with its policy header: the draft's own (Cloudflare sends it), and
// Atlassian's Beta-RateLimit for Jira's and Confluence's hourly quotas.
var structuredFields = [...]struct{ field, policy string }{
	{"Ratelimit", "Ratelimit-Policy"},
	{"Beta-Ratelimit", "Beta-Ratelimit-Policy"},
}

// shopifyCallLimit is Shopify's REST Admin API count, "32/40": the calls
// in its leaky bucket of the given size.
const shopifyCallLimit = "X-Shopify-Shop-Api-Call-Limit"

// githubRequestID marks an answer from GitHub's API, and
// githubSecondaryWait is the least wait GitHub asks for after a secondary
// rate limit that gives no header to go by ("wait for at least one
// minute before retrying").
const (
	githubRequestID     = "X-Github-Request-Id"
	githubSecondaryWait = time.Minute
)

// Count is what a response's headers say of the server's quota. The zero
// Count says none is left; ReadCount gives Remaining -1 when no header
// counts.
type Count struct {
	// Remaining is the quota left, -1 when the headers do not say.
	Remaining int
	// Limit is the full quota, 0 when the headers do not say.
	Limit int
	// Reset is how long until the quota resets, 0 when the headers do not
	// say or the reset is past.
	Reset time.Duration
	// ResetDue is set when the headers say a reset that is already past:
	// a time cut to its second, whose quota is about to come back.
	ResetDue bool
}

// ReadCount reads the count of the server's quota in h, in any of the
// families above. When several families (or several IETF draft policies)
// count, the least remaining wins, with its own limit and reset: that
// quota runs out first.
func ReadCount(h http.Header, now time.Time) Count {
	c := Count{Remaining: -1}
	for i := range requestCounts {
		f := &requestCounts[i]
		v := h[f.remaining]
		if len(v) == 0 {
			continue
		}
		n, ok := leadingCount(v[0])
		if !ok || !c.fewer(n) {
			continue
		}
		c.Remaining, c.Limit, c.Reset = n, 0, 0
		if l := h[f.limit]; len(l) > 0 {
			c.Limit, _ = leadingCount(l[0])
		}
		var said bool
		c.Reset, said = familyReset(h, f, now)
		c.ResetDue = said && c.Reset == 0
	}
	if v := h[shopifyCallLimit]; len(v) > 0 {
		if used, size, ok := parseCallLimit(v[0]); ok && c.fewer(size-used) {
			// A leaky bucket says no reset: it drains at a steady rate.
			c.Remaining, c.Limit, c.Reset, c.ResetDue = size-used, size, 0, false
		}
	}
	for _, sf := range structuredFields {
		v := h[sf.field]
		if len(v) == 0 {
			continue
		}
		// Every line, as WaitHint reads them: one policy may be on each.
		name, n, reset := parseRateLimitQuota(strings.Join(v, ","), now)
		if n < 0 || !c.fewer(n) {
			continue
		}
		c.Remaining, c.Limit, c.Reset, c.ResetDue = n, 0, reset, false
		if p := h[sf.policy]; len(p) > 0 {
			c.Limit = policyQuota(strings.Join(p, ","), name)
		}
	}
	return c
}

// fewer reports whether a count of n is news to c: the first count, or
// less than the one it has.
func (c *Count) fewer(n int) bool {
	return c.Remaining < 0 || n < c.Remaining
}

// familyReset reads the reset of family f, and whether it says one (0
// for a reset already past).
func familyReset(h http.Header, f *quotaHeaders, now time.Time) (time.Duration, bool) {
	if f.resetAfter != "" {
		if r := h[f.resetAfter]; len(r) > 0 {
			if d, ok := parseSeconds(strings.TrimSpace(r[0])); ok {
				return d, true
			}
		}
	}
	if r := h[f.reset]; len(r) > 0 {
		return parseReset(r[0], now)
	}
	return 0, false
}

// resetHint is the part of WaitHint past the Retry-After headers: the
// reset of a quota the response says is spent, in WaitHint's order.
func resetHint(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h["Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["Ratelimit-Remaining"]) {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	for _, sf := range structuredFields {
		if v := h[sf.field]; len(v) > 0 {
			if d, ok := parseRateLimitField(strings.Join(v, ","), now); ok {
				return d, true
			}
		}
	}
	// The resets first: most answers carry neither, and then the count
	// need not be looked up.
	if v := h["X-Ratelimit-Reset-After"]; len(v) > 0 && quotaSpent(h["X-Ratelimit-Remaining"]) {
		if d, ok := parseSeconds(strings.TrimSpace(v[0])); ok {
			return d, true
		}
	}
	if v := h["X-Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["X-Ratelimit-Remaining"]) {
		if d, ok := parseReset(v[0], now); ok {
			return d, true
		}
	}
	var (
		longest time.Duration
		found   bool
	)
	for i := range resourceResets {
		f := &resourceResets[i]
		v := h[f.reset]
		if len(v) == 0 || !quotaSpent(h[f.remaining]) {
			continue
		}
		if d, ok := parseReset(v[0], now); ok && (!found || d > longest) {
			longest, found = d, true
		}
	}
	return longest, found
}

// githubSecondaryHint is the minute GitHub asks for after a refusal that
// names no wait. GitHub answers a secondary rate limit with 403 or 429 and
// says so in the body; when neither Retry-After nor a spent
// X-RateLimit-Remaining comes with it, its documentation asks for at least
// a minute before retrying, and warns that an integration that keeps
// sending may be banned. The minute is given only to GitHub's own answers
// (X-GitHub-Request-Id), and only for those statuses: no other API asked
// for it, and for them a made-up minute would pause every request to the
// key on a guess. A 429 from GitHub that reached this point is such a
// refusal (the primary limit would have spent its count); a 403 reaches the
// transport's waits only when the policy reads it as rate-limited (its
// RateLimitPhrases, e.g. "secondary rate limit"), since a 403 without those
// headers may just as well be a refused permission.
func githubSecondaryHint(resp *http.Response) (time.Duration, bool) {
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		len(resp.Header[githubRequestID]) > 0 {
		return githubSecondaryWait, true
	}
	return 0, false
}

// RateLimited reports whether the status and headers of resp alone say the
// server refused the request for rate: 429, a 503 with Retry-After, a 403
// with Retry-After or X-RateLimit-Remaining: 0 (see "Refusals" in the
// package doc).
func RateLimited(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusServiceUnavailable:
		return len(resp.Header["Retry-After"]) > 0
	case http.StatusForbidden:
		return len(resp.Header["Retry-After"]) > 0 || countZero(resp.Header["X-Ratelimit-Remaining"])
	}
	return false
}

// quotaSpent reports whether a remaining-quota header is absent, zero, or
// unreadable: anything but a count above zero.
func quotaSpent(remaining []string) bool {
	return len(remaining) == 0 || countSpent(remaining[0])
}

// countSpent reports whether a remaining count is zero or unreadable.
func countSpent(value string) bool {
	secs, frac, ok := splitDecimal(strings.TrimSpace(value))
	return !ok || secs == 0 && frac == 0
}

// countZero reports whether a remaining count says, readably, that nothing
// is left: "0". Unlike countSpent, garbage is not zero.
func countZero(remaining []string) bool {
	if len(remaining) == 0 {
		return false
	}
	secs, frac, ok := splitDecimal(strings.TrimSpace(remaining[0]))
	return ok && secs == 0 && frac == 0
}

// leadingCount reads the count that starts a header value: "42", or the
// "42" of "42, 42;w=60".
func leadingCount(value string) (int, bool) {
	value = strings.TrimSpace(value)
	end := strings.IndexAny(value, ",; ")
	if end >= 0 {
		value = value[:end]
	}
	n, frac, ok := splitDecimal(value)
	if !ok || frac != 0 {
		return 0, false
	}
	return int(min(n, math.MaxInt32)), true
}

// parseCallLimit reads Shopify's "used/size" bucket count. A bucket fuller
// than its size counts as full.
func parseCallLimit(value string) (used, size int, ok bool) {
	u, s, found := strings.Cut(value, "/")
	if !found {
		return 0, 0, false
	}
	used, okUsed := wholeCount(strings.TrimSpace(u))
	size, okSize := wholeCount(strings.TrimSpace(s))
	if !okUsed || !okSize {
		return 0, 0, false
	}
	return min(used, size), size, true
}

// wholeCount reads a count that is all digits, clamped to MaxInt32.
func wholeCount(value string) (int, bool) {
	n, frac, ok := splitDecimal(value)
	if !ok || frac != 0 || strings.IndexByte(value, '.') >= 0 {
		return 0, false
	}
	return int(min(n, math.MaxInt32)), true
}
