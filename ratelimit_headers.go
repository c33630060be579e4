package ratewise

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// This file reads the counts a response gives of the server's quota, for
// the adaptive pacer: readAnswer and the header parsers it needs.

// countHeaders are the canonical names of the two header families that
// count a quota, the X- one first.
var countHeaders = [...]struct{ remaining, limit, reset string }{
	{"X-Ratelimit-Remaining", "X-Ratelimit-Limit", "X-Ratelimit-Reset"},
	{"Ratelimit-Remaining", "Ratelimit-Limit", "Ratelimit-Reset"},
}

// readAnswer reads a response for the pacer: its outcome and the
// rate-limit headers, in any of the forms WaitHint knows.
func readAnswer(resp *http.Response, err error, class Class, now time.Time) serverAnswer {
	if err != nil {
		return serverAnswer{remaining: -1}
	}
	an := serverAnswer{
		ok:        resp.StatusCode >= 200 && resp.StatusCode <= 299,
		refused:   class == RateLimited,
		remaining: -1,
	}
	h := resp.Header
	for _, names := range countHeaders {
		v := h[names.remaining]
		if len(v) == 0 {
			continue
		}
		if n, ok := leadingCount(v[0]); ok {
			an.remaining = n
			if l := h[names.limit]; len(l) > 0 {
				an.limit, _ = leadingCount(l[0])
			}
			if r := h[names.reset]; len(r) > 0 {
				an.reset, _ = parseReset(r[0], now)
			}
			return an
		}
	}
	if v := h["Ratelimit"]; len(v) > 0 {
		var name string
		// Every line, as WaitHint reads them: one policy may be on each.
		name, an.remaining, an.reset = parseRateLimitQuota(strings.Join(v, ","), now)
		if p := h["Ratelimit-Policy"]; an.remaining >= 0 && len(p) > 0 {
			an.limit = policyQuota(p[0], name)
		}
	}
	return an
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

// parseRateLimitQuota reads the IETF draft RateLimit header: the name,
// remaining quota and reset of the policy with the least quota left;
// remaining is -1 when no policy says.
func parseRateLimitQuota(value string, now time.Time) (name string, remaining int, reset time.Duration) {
	remaining = -1
	eachRateLimitPolicy(value, now, func(p rateLimitPolicy) {
		if !p.hasRemaining {
			return
		}
		if n, ok := leadingCount(p.remaining); ok && (remaining < 0 || n < remaining) {
			name, remaining, reset = p.name, n, p.reset
		}
	})
	return name, remaining, reset
}

// policyQuota reads the quota (q) of the named policy from the IETF draft
// RateLimit-Policy header; 0 when it is not there.
func policyQuota(value, name string) int {
	for member := range strings.SplitSeq(value, ",") {
		policy, params, _ := strings.Cut(member, ";")
		if strings.TrimSpace(policy) != name {
			continue
		}
		for param := range strings.SplitSeq(params, ";") {
			if k, v, ok := strings.Cut(param, "="); ok && strings.TrimSpace(k) == "q" {
				n, _ := leadingCount(v)
				return n
			}
		}
	}
	return 0
}
