// Package ratewisetest provides test helpers for code that calls
// rate-limited APIs through ratewise, for the project's own tests and for
// its users'.
//
// [NewServer] starts a fake rate-limited HTTP server on loopback: a token
// bucket per key, 429s with Retry-After in seconds or as a date, optional
// X-RateLimit-* and IETF RateLimit headers, latency and seeded fault
// injection. [NewBucket] is the same API as an in-process
// [http.RoundTripper], for testing/synctest bubbles, where its latency and
// the client's waits take no real time. [RateLimited], [RateLimitedThen] and [Sequence] are
// [httpmock.Responder] values for unit tests that touch no network.
//
// The package does not import ratewise itself, so it can test any client.
package ratewisetest
