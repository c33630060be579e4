// Package ratewise makes an [http.Client] polite and fast against
// rate-limited APIs. Its [Transport] is an [http.RoundTripper] that wraps
// another one and retries what the server refused for rate: it honours
// Retry-After and the rate-limit reset headers exactly, backs off with full
// jitter otherwise, and never waits past a total budget. By default it
// learns each host's limit from the server as soon as the server shows
// one ([LearnedScope], [Limit.Adaptive]), and paces to the limits you tell
// it ([Limit]), learning below them only where the server refuses under
// them; it pauses a host while the server asks, stops sending to
// a server that keeps failing ([WithBreaker]), and keeps retries within a
// share of a host's traffic ([RetryPolicy.RetryBudget]). A store
// ([store.Buckets], [store.Pauses], [store.Breakers]; the ratewise/redis
// module, or a [MemoryStore]) shares that state between transports.
//
// A response always comes back with a nil error, whatever its status, as
// the RoundTripper contract asks; [CheckResponse] turns a final 429 into a
// *[RateLimitError] for callers who want one.
package ratewise
