// Package admission is ratewise's inbound limiter: admission control for
// an [http.Handler]. For each request it decides, scope after scope,
// whether to let it in now, make it wait its turn, or refuse it (the
// "Allow / Queue / Reject" of a token-bucket limiter), and tells the
// client, in the rate-limit headers a ratewise Transport reads, exactly
// how much it may send. The name says what it does: a server's admission
// control, where ratewise's Transport paces what a client sends out.
//
//	h, err := admission.New(api,
//		admission.WithLimit(admission.Limit{Name: "ip", Rate: rate.Every(6 * time.Second), Burst: 5}),            // 10/min per client IP
//		admission.WithLimit(admission.Limit{Name: "global", Rate: rate.Every(600 * time.Millisecond), Burst: 20, // 100/min in all
//			Key: ratewise.Global, MaxWait: 10 * time.Second, MaxQueue: 50}),                                      // queued, not refused
//		admission.WithExemptPaths("/health"))
//
// Scopes are [Limit] values, the part of a client's [ratewise.Limit] a
// server-side scope honours: a token bucket (Rate and Burst) or a fixed
// window of Burst per Window, keyed by the
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
//
// # Client addresses
//
// ClientIP says where a request's client address comes from: the
// connection's peer (RemoteAddr) or, when the peer is one of the
// TrustedProxies, the address the proxies say they received the request
// from. A scope whose Limit has no Key is keyed by it.
//
// The zero value believes no header: the client is RemoteAddr, which no
// client can forge. A header is believed only as far as trusted proxies
// wrote it: read from its end, each address that is a trusted proxy's
// hands over to the one before it, and the first address that is not a
// trusted proxy's is the client's. What an untrusted client puts in the
// header itself lies before that and is never read, so a forged header
// moves no one to another key.
//
// # Headers
//
// Headers picks the rate-limit fields a Handler writes, as a set of
// flags; DefaultHeaders writes every field. What each field says, for the
// scopes that applied to the request:
//
//   - HeaderRateLimit: the IETF fields, in the structured syntax of
//     draft-ietf-httpapi-ratelimit-headers (drafts -08 to -11; -11 is the
//     latest): RateLimit-Policy lists each scope as
//     `"name";q=Q;w=W` (q its Burst; w its Window, or for a bucket the
//     seconds an empty bucket takes to fill, so that q/w is its rate), and
//     RateLimit gives each scope's `"name";r=R;t=T`: R the whole turns
//     left once this request took its own, T the seconds until the
//     quota is whole again (a bucket full, a window over), rounded up.
//     That T is the reset of drafts -08 and -09, which a client that
//     reads the refill as (q − r)/t, as ratewise's does, needs; for a
//     window it is also what -10 and -11 call the effective window, and
//     for a bucket it is longer, which keeps a client that reads it so
//     within the limit.
//   - HeaderXRateLimit: X-RateLimit-Limit, -Remaining and -Reset of the
//     scope with the fewest turns left (on a refusal, the refusing
//     scope's), with the same values as its RateLimit item; the reset
//     is in seconds from now, not a Unix time.
//   - HeaderRetryAfter: Retry-After on refusals, in whole seconds,
//     rounded up and at least 1: never before every scope whose state
//     this process knows would admit the request.
//
// The quota fields go on every answer, admitted requests' too: what a
// client needs to send no request the server would refuse.
// HeaderRefusalsOnly keeps them to refusals.
//
// # Scopes
//
// WithLimit adds a scope; give it once per scope. Requests go through the
// scopes in the order given. A Limit's fields work as follows:
//
//   - Name: one per scope, printable ASCII.
//   - Rate and Burst, or Burst and Window: a client told the same limit,
//     which holds to any Window, never goes over it. A window follows
//     the next while requests keep coming.
//   - Key: nil is the client's IP, not the Host a client's nil Key means.
//   - MaxWait, MaxQueue (per process), FailFast: queueing.
//   - Store: the keys are "admission:" and the Name, then ":" and the key
//     unless the scope is Global. When the store fails, this process's own
//     bucket stands in, unless the store fails closed (its error wraps
//     ratewise.ErrStoreUnavailable): then the request is answered 503.
package admission
