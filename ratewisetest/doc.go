// Package ratewisetest provides test helpers for code that calls
// rate-limited APIs through ratewise, for the project's own tests and for
// its users'.
//
// [NewServer] starts a fake rate-limited HTTP server on loopback: a token
// bucket per key, 429s with Retry-After in seconds or as a date, optional
// X-RateLimit-* and IETF RateLimit headers, latency and seeded fault
// injection. [RateLimited], [RateLimitedThen] and [Sequence] are
// [httpmock.Responder] values for unit tests that touch no network.
//
// The package does not import ratewise itself, so it can test any client.
package ratewisetest
