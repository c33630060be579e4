// Package admission is ratewise's inbound limiter: admission control for
// an [http.Handler]. For each request it decides, scope after scope,
// whether to let it in now, make it wait its turn, or refuse it (the
// "Allow / Queue / Reject" of a token-bucket limiter), and tells the
// client, in the rate-limit headers a ratewise Transport reads, exactly
// how much it may send. The name says what it does: a server's admission
// control, where ratewise's Transport paces what a client sends out.
//
//	h, err := admission.New(api,
//		admission.WithLimit(ratewise.Limit{Name: "ip", Rate: rate.Every(6 * time.Second), Burst: 5}),            // 10/min per client IP
//		admission.WithLimit(ratewise.Limit{Name: "global", Rate: rate.Every(600 * time.Millisecond), Burst: 20, // 100/min in all
//			Key: ratewise.Global, MaxWait: 10 * time.Second, MaxQueue: 50}),                                     // queued, not refused
//		admission.WithExemptPaths("/health"))
//
// Scopes are [ratewise.Limit] values, as a client's are: a token bucket
// (Rate and Burst) or a fixed window of Burst per Window, keyed by the
// client's IP address (a nil Key), by a header ([ratewise.ByHeader]), by
// route ([Route]), by any [ratewise.KeyFunc] (the user an authentication
// middleware put in the request's context), or [ratewise.Global]. A
// request passes only when every scope that applies to it admits it, in
// the order given; a scope that refuses takes nothing from those before
// it: each gives its turn back. A scope with a Store keeps its buckets
// there ([ratewise.MemoryStore], or the ratewise/redis module's Store),
// so that every replica of a service holds one limit.
//
// A scope refuses at once, unless its Limit has a MaxWait: then a request
// whose turn comes within MaxWait waits for it, at most MaxQueue of a key
// at a time (DefaultMaxQueue when zero), and leaves the queue, taking
// nothing, when its context ends.
//
// A refusal is a 429 with Retry-After (whole seconds, never less than the
// wait), the IETF RateLimit-Policy and RateLimit fields
// (draft-ietf-httpapi-ratelimit-headers, the structured form of drafts
// -08 to -11), the X-RateLimit-Limit, -Remaining and -Reset of older
// clients, and a problem document (RFC 9457) naming the scopes and the
// wait. Admitted requests carry the same quota fields, so that a client
// that reads them, as ratewise's does, sends no request the server would
// refuse. See [Headers] for what each field says and how to choose them.
//
// Handler.Stats, the [Hooks] and a logger's events say what it admitted,
// queued and refused, per scope; the ratewise/prometheus module exports
// them. Handler.Status reports a key's tokens in each scope.
package admission
