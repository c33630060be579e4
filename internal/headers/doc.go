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
package headers
