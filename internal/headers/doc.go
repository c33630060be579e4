// Package headers reads what the headers of an HTTP response say about
// rate limits: how long the server asks the client to wait (Retry-After,
// its millisecond forms and the resets of the vendors' quota headers),
// whether the answer is a refusal for rate, and the count of the server's
// quota that the learned pace follows.
//
// Its functions are pure: each takes the time it counts from as now, and
// none allocates on a typical answer, since the transport reads every
// answer of a key it paces. It names no type of the ratewise package,
// which wraps ParseRetryAfter and WaitHint as its own.
package headers
