// Package ratewisetest provides test helpers for code that calls
// rate-limited APIs through ratewise, for the project's own tests and for
// its users'.
//
// [NewServer] starts a fake rate-limited HTTP server on loopback. It keeps,
// per key, each kind of limit real servers keep ([Model]): a token bucket,
// nginx's leaky bucket that queues or refuses, a fixed window on the clock
// or from a key's first request, the sliding-window counter of most
// middlewares, a cap on requests served at once, and a load shedder that
// refuses a share of requests at any rate. It refuses with 429 (or any
// status, or nginx's bare HTML page) and Retry-After in seconds, as a
// date or as the whole window, and can publish X-RateLimit-* headers (the
// reset in seconds, as a Unix time or as a Go duration) and the IETF
// RateLimit ones; latency, the time an admitted request takes to serve
// and seeded faults come on top. [NewBucket] is the same API as an
// in-process [http.RoundTripper], for testing/synctest bubbles, where its
// latency, its queue, its service time and the client's waits take no
// real time, so that a test can assert exact fake durations.
// [Config.Ideal] says the least time a number of calls can take against a
// limit, the yardstick of a client's pacing.
// [RateLimited], [RateLimitedThen] and [Sequence] are [httpmock.Responder]
// values for unit tests that touch no network.
//
// The package does not import ratewise itself, so it can test any client.
package ratewisetest
