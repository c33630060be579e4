package headers

import (
	"strings"
	"time"
)

// This file reads the IETF draft's RateLimit and RateLimit-Policy fields
// (draft-ietf-httpapi-ratelimit-headers), which Atlassian's Beta-RateLimit
// and Beta-RateLimit-Policy share: a list of policies, each with its
// remaining quota and reset, in the structured form of later drafts or the
// dictionary form of earlier ones.

// parseRateLimitField reads the IETF draft RateLimit header. It knows the
// structured list form of later drafts, `"burst";r=0;t=5, "day";r=9;t=60`,
// one item per policy, and the dictionary form of earlier ones,
// `limit=100, remaining=0, reset=30`, one key per member. A policy whose
// quota is spent (r or remaining zero, or absent) is a candidate; the
// longest reset among them is the wait, since every spent policy must
// reset before a request can pass.
func parseRateLimitField(value string, now time.Time) (time.Duration, bool) {
	var (
		longest time.Duration
		found   bool
	)
	eachRateLimitPolicy(value, now, func(p rateLimitPolicy) {
		spent := !p.hasRemaining || countSpent(p.remaining)
		if p.hasReset && spent && (!found || p.reset > longest) {
			longest, found = p.reset, true
		}
	})
	return longest, found
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

// eachRateLimitPolicy calls fn with each policy of an IETF draft RateLimit
// value, in either form: each item of the structured list, then the
// members of the dictionary form gathered into one unnamed policy. It
// cuts rather than splits, so that reading a header allocates nothing.
func eachRateLimitPolicy(value string, now time.Time, fn func(rateLimitPolicy)) {
	var dict rateLimitPolicy
	for value != "" {
		var member string
		member, value, _ = strings.Cut(value, ",")
		name, params, isItem := strings.Cut(member, ";")
		if !isItem {
			dict.set(member, now)
			continue
		}
		item := rateLimitPolicy{name: strings.TrimSpace(name)}
		for params != "" {
			var param string
			param, params, _ = strings.Cut(params, ";")
			item.set(param, now)
		}
		fn(item)
	}
	fn(dict)
}

// rateLimitPolicy is what the RateLimit header says of one policy.
type rateLimitPolicy struct {
	name         string // the list item's name; "" in the dictionary form
	reset        time.Duration
	hasReset     bool
	badReset     bool // a reset was given and could not be read
	remaining    string
	hasRemaining bool
}

// set reads one key=value parameter; other parameters are ignored.
func (p *rateLimitPolicy) set(param string, now time.Time) {
	key, val, ok := strings.Cut(param, "=")
	if !ok {
		return
	}
	val = strings.Trim(strings.TrimSpace(val), `"`)
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "t", "reset":
		p.reset, p.hasReset = parseReset(val, now)
		p.badReset = !p.hasReset
	case "r", "remaining":
		p.remaining, p.hasRemaining = val, true
	}
}

// policyQuota reads the quota (q) of the named policy from the IETF draft
// RateLimit-Policy header; 0 when it is not there. When the header holds a
// single policy and no policy of that name, its quota is taken: a server
// that sends one limit and one policy means the same one, whatever their
// names (Cloudflare's documentation shows `"default";r=50;t=30` with
// `"burst";q=100;w=60`, and draft -07 names no policy: `100;w=10` with
// `limit=100, remaining=50, reset=5`).
func policyQuota(value, name string) int {
	var (
		members int
		only    int
	)
	for value != "" {
		var member string
		member, value, _ = strings.Cut(value, ",")
		if strings.TrimSpace(member) == "" {
			continue
		}
		members++
		policy, params, _ := strings.Cut(member, ";")
		policy = strings.TrimSpace(policy)
		q := paramQuota(params)
		if policy == name {
			return q
		}
		if n, ok := leadingCount(policy); ok && q == 0 {
			q = n // draft -07 and earlier: the item is the quota, "100;w=60"
		}
		only = q
	}
	if members == 1 {
		return only
	}
	return 0
}

// paramQuota reads the q parameter of a RateLimit-Policy item; 0 when it
// has none.
func paramQuota(params string) int {
	for params != "" {
		var param string
		param, params, _ = strings.Cut(params, ";")
		if k, v, ok := strings.Cut(param, "="); ok && strings.TrimSpace(k) == "q" {
			n, _ := leadingCount(v)
			return n
		}
	}
	return 0
}
