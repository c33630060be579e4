// Package headers reads what the headers of an HTTP response say about
// rate limits: how long the server asks the client to wait (Retry-After,
// its millisecond forms and the resets of the vendors' quota headers),
// whether the answer is a refusal for rate, and the count of the server's
// quota that the learned pace follows.
//
// Its functions are pure: those that count time take now as an argument.
// ReadCount and WaitHint allocate nothing on the answers of the APIs they
// know, since the transport reads every answer of a key it paces. The
// package names no type of ratewise, whose ParseRetryAfter and WaitHint
// are this package's, and whose DefaultClassify is RateLimited.
//
// # Wait hints
//
// WaitHint returns how long resp asks the client to wait before the next
// request, from the first of these that gives a valid wait:
//
//  1. Retry-After-Ms, then X-Ms-Retry-After-Ms: milliseconds, as Azure
//     and OpenAI send them; the same hint as Retry-After, finer, so
//     read first, as Azure's own clients do;
//  2. Retry-After (see [ParseRetryAfter]), the first valid value when it
//     is repeated;
//  3. RateLimit-Reset, unless RateLimit-Remaining says quota is left (the
//     IETF draft's early form);
//  4. RateLimit, the IETF draft's structured header, then Atlassian's
//     Beta-RateLimit of the same syntax: the "t" (or "reset") parameter
//     of the policy whose quota ("r" or "remaining") is spent, the
//     longest when several are;
//  5. X-RateLimit-Reset-After (Discord: seconds from now), then
//     X-RateLimit-Reset, unless X-RateLimit-Remaining says quota is left;
//  6. the per-resource resets of OpenAI (X-RateLimit-Reset-Requests,
//     X-RateLimit-Reset-Tokens) and Anthropic
//     (Anthropic-RateLimit-{Requests,Tokens,Input-Tokens,Output-Tokens}-Reset):
//     the longest of those whose remaining count is spent;
//  7. a minute, for a 403 or 429 from GitHub (it carries
//     X-GitHub-Request-Id) that names no wait: GitHub asks a client
//     refused by a secondary rate limit without Retry-After to wait at
//     least that long. The transport reads a hint only from a refusal;
//     a 403 that is none (a permission refused) has the minute too.
//
// A reset is seconds from now or, when the number is that large (above
// 10^9), the Unix time of the reset, possibly fractional; a Go duration
// ("6m0s", "12ms", as OpenAI writes them); or an RFC 3339 date-time, with
// or without seconds ("2026-03-10T12:01:00Z", Jira's "2026-03-10T12:01Z").
// A reset is skipped when its remaining count is above zero: the refusal
// then came from some other limit, and waiting for that quota's reset
// would be waiting for the wrong thing. Absurd, negative, malformed and
// overflowing values are no hint. It reports false when no header gives a
// valid wait. UnreadableHint names the first hint WaitHint passed over
// because it could not be read, and the value it read, for a log.
// RetryAfterHint reads the first two alone: the wait a transient error
// (a 503 that is no refusal) asks for, which a quota's reset beside it
// does not speak for.
//
// # Retry-After
//
// ParseRetryAfter reads a Retry-After value (RFC 9110, section 10.2.3) as a
// wait from now. It accepts delta-seconds ("120"), an HTTP-date in any of
// the three forms RFC 9110 allows (IMF-fixdate, RFC 850 and asctime), and,
// leniently, non-negative decimal seconds ("1.5") and an RFC 1123 date in
// "UTC" rather than "GMT". A date in the past means
// a wait of 0; an RFC 850 two-digit year more than 50 years ahead is read
// as the past year with the same last two digits, as RFC 9110 asks. It
// reports false for anything else: empty or malformed values, signs,
// exponents, NaN, and waits too long for a time.Duration.
//
// # Refusals
//
// RateLimited reports whether the status and headers of resp alone say
// that the server refused the request for rate:
//
//   - 429 Too Many Requests;
//   - 503 Service Unavailable carrying Retry-After;
//   - 403 Forbidden carrying Retry-After, or X-RateLimit-Remaining: 0, as
//     GitHub refuses a request over its primary rate limit or over a
//     secondary one that says when to come back.
//
// Any other answer, other 403s included, is not: without those headers a
// 403 cannot be told from a refused permission but by its body.
package headers
