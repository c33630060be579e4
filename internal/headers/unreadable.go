package headers

import (
	"net/http"
	"strings"
	"time"
)

// UnreadableHint returns the first wait hint of resp that WaitHint reads
// and cannot: its header's name, in net/http's canonical form, and the
// value as the response has it (for the IETF draft's RateLimit, its lines
// joined with commas). It follows WaitHint's order and stops at the first
// hint that reads, so that what it reports is what WaitHint passed over,
// the hints after it (or, with none, the client's backoff) standing in. A
// reset whose remaining count is above zero is not read, so never
// reported. It reports false when every hint read was readable, or there
// was none. Unlike WaitHint, it may allocate: the transport asks it only
// to log what it finds.
func UnreadableHint(resp *http.Response, now time.Time) (name, value string, ok bool) {
	if resp == nil {
		return "", "", false
	}
	h := resp.Header
	var s hintScan
	for _, header := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		s.scan(header, h[header], func(v string) bool { _, ok := parseMillis(v); return ok })
	}
	s.scan("Retry-After", h["Retry-After"], func(v string) bool { _, ok := ParseRetryAfter(v, now); return ok })
	reset := func(v string) bool { _, ok := parseReset(v, now); return ok }
	if v := h["Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["Ratelimit-Remaining"]) {
		s.scan("Ratelimit-Reset", v[:1], reset)
	}
	for _, sf := range structuredFields {
		v := h[sf.field]
		if len(v) == 0 || s.done {
			continue
		}
		joined := strings.Join(v, ",")
		if unreadableSpentReset(joined, now) {
			s.report(sf.field, joined)
		} else if _, ok := parseRateLimitField(joined, now); ok {
			s.done = true
		}
	}
	if v := h["X-Ratelimit-Reset-After"]; len(v) > 0 && quotaSpent(h["X-Ratelimit-Remaining"]) {
		s.scan("X-Ratelimit-Reset-After", v[:1], func(v string) bool { _, ok := parseSeconds(strings.TrimSpace(v)); return ok })
	}
	if v := h["X-Ratelimit-Reset"]; len(v) > 0 && quotaSpent(h["X-Ratelimit-Remaining"]) {
		s.scan("X-Ratelimit-Reset", v[:1], reset)
	}
	for i := range resourceResets {
		f := &resourceResets[i]
		if v := h[f.reset]; len(v) > 0 && quotaSpent(h[f.remaining]) {
			s.scan(f.reset, v[:1], reset)
		}
	}
	return s.name, s.value, s.bad
}

// hintScan goes through the wait hints in WaitHint's order until one
// reads or one does not: then done is set, and bad, name and value say
// which it was when it did not.
type hintScan struct {
	done, bad   bool
	name, value string
}

// scan reads the values of header that WaitHint reads, in order, with
// reads.
func (s *hintScan) scan(header string, values []string, reads func(string) bool) {
	for _, v := range values {
		if s.done {
			return
		}
		if reads(v) {
			s.done = true
		} else {
			s.report(header, v)
		}
	}
}

func (s *hintScan) report(header, value string) {
	s.done, s.bad, s.name, s.value = true, true, header, value
}

// unreadableSpentReset reports whether a policy of an IETF draft
// RateLimit value whose quota is spent gives a reset that cannot be read:
// WaitHint then skips that policy.
func unreadableSpentReset(value string, now time.Time) bool {
	var found bool
	eachRateLimitPolicy(value, now, func(p rateLimitPolicy) {
		if p.badReset && (!p.hasRemaining || countSpent(p.remaining)) {
			found = true
		}
	})
	return found
}
