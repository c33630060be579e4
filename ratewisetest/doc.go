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
//
// # Ideal times
//
// Ideal returns the least time calls requests take against the limit c
// describes, from the first request's arrival to the last one's answer,
// for a client that sends each request the moment the limit would admit
// it, starting on a fresh key at a window's start; latency, the handler's
// own time and faults aside: the last one's admission, below, plus
// ServiceTime. It is the yardstick of
// a client's pacing: such a client takes Ideal, and one that waits longer
// than it must takes longer. A client that starts late in a clock-aligned
// window (FixedWindow, SlidingWindow) can do up to a Window better, since
// its first window is short. For a Config that Validate refuses it
// returns 0. The last request is admitted, from the first one's arrival:
//
//   - TokenBucket: (calls − Burst)/Rate, a zero Burst counting as 1, and
//     0 without a limit.
//   - LeakyBucket with NoDelay: (calls − Burst − 1)/Rate.
//   - LeakyBucket queued: (calls − 1)/Rate, the last answer's wait
//     included.
//   - FixedWindow and FixedWindowFromFirst: (⌈calls/Limit⌉ − 1)·Window.
//   - SlidingWindow: (calls − 1)·Window/Limit when calls > Limit, else 0:
//     Limit pass at once, then, with the previous window counting in
//     full, one every Window/Limit. Since a request passes only once the
//     weighted count is below Limit, the last passes up to a nanosecond
//     later.
//   - ConcurrencyCap: (⌈calls/Limit⌉ − 1)·ServiceTime: Limit at once,
//     then Limit more each time they are answered, so that Ideal is
//     ⌈calls/Limit⌉·ServiceTime.
//   - LoadShed: at once, since it sets no pace: a client that sends a
//     refused request again at once loses no time to the refusal (it may
//     still run out of attempts).
//
// Times below the nanosecond are rounded up, and those past the longest
// duration saturate.
//
// # Bucket
//
// Bucket is the rate-limited API of a [Server] as an [http.RoundTripper]
// that answers in the caller's goroutine, with no network: the same
// limits of every [Model], headers, Retry-After, latency, service time,
// faults and counts. It starts no goroutine and waits only on timers in
// the caller's goroutine, so inside a testing/synctest bubble its
// latency, a LeakyBucket's queue, the service time and the client's waits
// take no real time, and a batch of many seconds runs in milliseconds. Create it with [NewBucket].
// A Bucket is safe for concurrent use.
//
// A request cancelled during the latency, while queued or while served
// gets its context's error, and a
// FaultReset a connection reset (syscall.ECONNRESET), as a client over
// the network would. A FaultResetAfterHeaders body ends in a connection
// reset and a FaultTruncatedBody one in io.ErrUnexpectedEOF; the pauses
// of a FaultSlowBody are spent before RoundTrip returns.
//
// # Server
//
// Server is a fake rate-limited HTTP server listening on 127.0.0.1, built on
// [httptest.Server]. Create it with [NewServer] and stop it with
// [Server.Close]. A Server is safe for concurrent use.
//
// Each request waits out the configured latency first, then meets the
// limit of its key: a request abandoned during the latency never reached
// the "application", so it is not counted. A LeakyBucket's queued request
// then waits its turn, and an admitted request is held for the
// ServiceTime, before the handler answers it.
package ratewisetest
