// Package ratewise makes an [http.Client] polite and fast against
// rate-limited APIs. Its [Transport] is an [http.RoundTripper] that wraps
// another one and retries what the server refused for rate: it honours
// Retry-After and the rate-limit reset headers exactly, backs off with full
// jitter otherwise, and never waits past a total budget. By default it
// learns each host's limit from the server as soon as the server shows
// one ([LearnedScope], [Limit.Adaptive]), and paces to the limits you tell
// it ([Limit]), learning below them only where the server refuses under
// them; it pauses a host while the server asks ([PausePolicy]), stops
// sending to a server that keeps failing ([WithBreaker]), and keeps
// retries within a share of a host's traffic ([RetryPolicy.RetryBudget]).
// A store ([WithStore]: the ratewise/redis module, or a [MemoryStore])
// shares that state between the replicas of a fleet.
//
// A response always comes back with a nil error, whatever its status, as
// the RoundTripper contract asks; [CheckResponse] turns a final 429 into a
// *[RateLimitError] for callers who want one.
//
// # The pipeline
//
// One call of RoundTrip visits these files, in this order. Every call:
// transport.go takes it, with what its context carries (context.go);
// call.go runs its attempts, its body made replayable (call_body.go) and
// its share paid into its host's retry budget (retry_budget.go). Each
// attempt: call_admit.go admits it through the pause gate (pause.go) and
// every limit scope (limit_scope.go; the key by the Limit's KeyFunc,
// limit.go), whose engine, internal/scopes, gives its turn; call.go sends
// it and reads the reply (retry_classify.go); call_decide.go feeds the
// reply back and decides: the response is final, or a retry. stats.go
// counts each step. Only when they are there: a breaker (call_breaker.go),
// a store asked first (call_prefetch.go), a wait (call_wait.go), a
// retry's budget (retry_budget.go), a trace or a logger (call_trace.go,
// log.go). The engines behind the stages sit in internal/ packages that
// know nothing of calls. A call none of the layers holds back before it
// is sent (transport.go's holdsNothingBack: no store, trace, told pace nor
// pause, no pace its key learned, nothing in its context; a clean breaker
// and a free slot of each concurrency cap, taken at once) sends its first
// attempt straight away, and is made a call in call.go only when the
// answer needs one: a retry, a failure to tell its breaker, or something
// to learn.
//
// # Glossary
//
// Each word names one thing, here and in logs, metrics and errors.
//
//   - call: one RoundTrip, every attempt and wait of it ([Stats.Calls]).
//   - attempt: one request sent to the base RoundTripper.
//   - refusal: a response read as rate-limited ([RateLimited], [Blocked]).
//   - wait hint: how long a refusal asks to wait ([WaitHint]): Retry-After
//     or a reset header.
//   - pause: what a wait hint sets on a key: every request to it is held
//     until the hint runs out ([PausePolicy], [WaitPause]).
//   - cooldown: how long an open breaker sends nothing
//     ([BreakerPolicy.Cooldown]); it escalates, level by level
//     ([BreakerPolicy.Escalation]).
//   - budget: the call's wait budget ([RetryPolicy.TotalWaitCap],
//     [WithBudget]); past it a call ends ([ErrBudgetExhausted]). The retry
//     budget, a share of a host's traffic that may be retries, is always
//     called so in full ([RetryPolicy.RetryBudget]).
//   - limit: what a client keeps to ([Limit]); told when you give it, learned
//     when the transport found it from the server's refusals and headers
//     (the [LearnedScope]; [Limit.Adaptive] asks for it). Learned is the one
//     word for that, in docs and statuses alike.
//   - scope: one Limit at work, keyed by its [KeyFunc].
//   - pace: the spacing a scope keeps between a key's requests, told or
//     learned.
//   - window: a span of time with a count of turns or failures in it: a
//     Limit's [Limit.Window] (its Burst turns each Window), the breaker's
//     [BreakerPolicy.Window] (WindowFailures within it trip), and the
//     server's window the learned pace finds. Always named with its owner.
//   - store: where a fleet shares state; what a store implements is
//     package store, apart from this one.
//   - refused: [RateLimitError] when the server refused (a final 429);
//     [ClientLimitError] when the client's own limit refused before
//     sending ([ErrLimited]); [CircuitOpenError] when the breaker did.
//   - status: what holds a key back, its pause, scopes and breaker
//     ([Transport.KeyStatus]).
//
// # Limits
//
// A Limit paces a key by a token bucket (Rate and Burst), a minimum spacing
// between starts (MinSpacing), a window of Burst starts (Window), or what
// it learned from the server (Adaptive), and may cap the requests in
// flight (MaxConcurrent). Without options, [New] adds the [LearnedScope]:
// a host sends unpaced until its first rate-limit signal (a refusal, or a
// count of its quota in the headers), then at the pace it learned. A Limit
// you give that paces is a ceiling the learning stays under: a key the
// server never refuses under it is paced by it to the letter, and one the
// server refuses learns below it. An Adaptive Limit of your own that
// applies to every request replaces the LearnedScope, and
// [WithoutLearning] turns it off.
//
// Where a scope paces requests, a refusal whose wait hint is a second or
// less does not pause the key's other requests: the pace already spaces
// them, and a Retry-After rounded up to whole seconds would waste what the
// server refills meanwhile. The refused request still waits its hint.
//
// [Transport.SetLimit] finds a scope by Name and keeps its Key and Applies,
// since two funcs cannot be told apart: to key or pick requests another
// way, add a scope under another Name with [Transport.AddLimit]. A raised
// MaxConcurrent lets waiting requests through at once, a lowered one takes
// slots back as they free.
//
// # Breakers
//
// A request that finds its breaker open waits for the reset, and one that
// finds every probe slot taken waits for the probes' outcome, when its
// wait budget allows; [BreakerPolicy.FailFast] refuses at once instead.
// Every quiet Decay brings the cooldown one step back down, and a trip
// within RetripWindow of the last closing opens it one level up.
//
// A breaker counts rate-limit events, not refusals: a server whose quota
// runs out refuses every request in flight at that moment, and those
// siblings are one failure. A rate-limited response counts only when its
// request was sent after the key's last counted one was seen, and after
// the wait that one asked for (its wait hint, and at least a second); other
// refusals count neither way. So what trips a breaker is refusals that
// persist while the client honours every hint and pace. Network errors and
// 5xx count one each: a server that is down fails every request on its
// own, and a burst of connection resets trips the breaker at once.
//
// [Transport.SetBreakerPolicy] applies its thresholds to the next outcome,
// its cooldowns and escalation to the next trip, and its HalfOpenProbes,
// ProbeTimeout, IsFailure and OnStateChange to the next request or change;
// a breaker's next cooldown lasts at least the Cooldown it was built
// under.
//
// # Wait budgets
//
// A call's waits (backoff, pauses, pace, slots, breaker) come out of one
// budget: its policy's TotalWaitCap, or a budget shared through the
// context ([WithBudget]). With a shared budget, waits that overlap are paid
// once: two calls waiting out the same 30 seconds spend 30 seconds. A wait
// cut short by cancellation gives back what it alone covered. A wait for a
// concurrency slot, whose length is unknown when it starts, is bounded by
// what is left then and paid for when it ends, so that calls queued for
// slots together may overspend a little.
//
// # Fleets and stores
//
// [WithStore] puts in one store what replicas share: every told Limit that
// keeps a token bucket (a finite Rate, and no MinSpacing, Reserve or
// Window) takes its turns from the store's bucket; the pause gate's pauses
// are the store's, so a refusal one replica sees pauses the key in all;
// the breakers count failures and trip together. A store that is a
// store.Learned keeps what the learned pace learns (the [LearnedScope],
// and every Adaptive Limit), so that the fleet learns as one client: one
// pace its replicas take their turns from, one learned window, the counts
// a server publishes, taken from by all; a refusal any replica sees
// teaches every one, and a replica never refused paces under what the
// fleet learned. A store that is a store.Admitter, as MemoryStore and
// ratewise/redis's Store are, is asked once before each attempt for its
// breaker, pause, told bucket and learned turn together, and a success is
// told with the next attempt's asking: a call that needs no help costs one
// round trip. When a store fails, each replica goes on with its own state,
// learning by itself meanwhile, unless the store fails closed
// ([ErrStoreUnavailable]): then the request fails unsent. What a store
// implements is package store.
//
// # Turns for work that is not HTTP
//
// [Transport.Acquire] takes turns of a named scope: a token of its bucket,
// a start in its Window, or a gap of its MinSpacing (n gaps, the first of
// which starts when Acquire returns). key is what the scope's KeyFunc would
// return for a request; a Global scope ignores it. n is at least 1 and, for
// a bucket or a window, at most Burst. A scope that paces nothing returns
// nil at once; an Adaptive one has no turns to give and returns an error.
// A scope with a Store takes from the store's bucket under the requests'
// key. FailFast and MaxQueue apply as to requests, and a PriorityLow
// caller ([WithPriority]) takes at most Burst less Reserve at once. A wait
// ended by ctx gives its turns back (tokens a store reserved are spent).
// Acquire takes no concurrency slot and does not wait for a pause; its
// waits count in [Transport.Stats] and [CallStats] as pacing waits, and are
// traced with key as their Key.
//
// # Wait hints
//
// [WaitHint] reads, in order, the first of these that gives a valid wait:
// Retry-After-Ms, then X-Ms-Retry-After-Ms (Azure, OpenAI); Retry-After,
// the first valid value when repeated; RateLimit-Reset unless
// RateLimit-Remaining says quota is left; RateLimit and Atlassian's
// Beta-RateLimit (the "t" of the spent policy, the longest when several
// are); X-RateLimit-Reset-After (Discord), then X-RateLimit-Reset unless
// X-RateLimit-Remaining says quota is left; the per-resource resets of
// OpenAI (X-RateLimit-Reset-Requests, -Tokens) and Anthropic
// (Anthropic-RateLimit-*-Reset), the longest whose count is spent; and a
// minute for a 403 or 429 from GitHub that names no wait, as GitHub asks.
// A reset is seconds from now or, above 10^9, a Unix time; a Go duration
// ("6m0s"); or an RFC 3339 date-time, with or without seconds. Absurd,
// negative, malformed and overflowing values are no hint.
//
// [ParseRetryAfter] reads an RFC 850 two-digit year more than 50 years
// ahead as the past year with the same last two digits, as RFC 9110 asks.
// [DefaultClassify] reads no body: a 403 cannot be told from a refused
// permission but by its body, so a 403 without Retry-After or
// X-RateLimit-Remaining: 0 is Final. [RetryPolicy.CheckResponse]
// classifies with a policy a response that did not come through the
// transport.
//
// # Logging
//
// [WithLogger] writes these events:
//
//	event=rate_retry    attempt max delay_ms reason key endpoint     (Info)
//	event=rate_wait     kind delay_ms attempt key endpoint           (Info)
//	event=rate_success  attempts total_wait_ms status key endpoint   (Info after a retry or a wait, else Debug)
//	event=rate_giveup   reason attempts total_wait_ms status error key endpoint (Warn)
//	event=breaker_state from to key breaker_level [reset_in_ms opened_at cause_status cause_class cause_detail] (Warn on open, else Info)
//	event=rate_hint_unreadable header value status key endpoint (Warn, once per key)
//
// key is the request's host (for breaker_state, the breaker's key: ByHeader
// hashes the header's value) and endpoint the label of [WithEndpoint]. A
// breaker_state event of a breaker that opened says when (opened_at, RFC
// 3339) and why ([BreakerCause]); one to open says for how long. A
// rate_hint_unreadable event names a wait hint of a refusal that could
// not be read ([WaitHint]'s headers, such as "Retry-After: soon"), with
// the value read (its first 64 bytes): the hints after it, or the
// backoff, stood in. It is logged once per key, not per response, until
// the key has been idle for [DefaultIdleTimeout].
//
// # go-retryablehttp
//
// For a [retryablehttp.Client], [RetryablehttpPolicy] is wired in with
//
//	client.CheckRetry, client.Backoff = ratewise.RetryablehttpPolicy(p)
//	client.RetryMax = p.WithDefaults().MaxAttempts - 1 // retryablehttp counts retries
//	client.ErrorHandler = retryablehttp.PassthroughErrorHandler // keep the last response
//
// Backoff ignores the client's RetryWaitMin and RetryWaitMax: p's delays
// apply. retryablehttp's hooks have no place for the total wait cap (a hint
// longer than TotalWaitCap only stops the retries), the separate
// NetworkRetries limit, nor the Idempotency-Key header (the method alone
// decides). Use a context deadline to bound the whole call.
//
// # Environment
//
// [LimitFromEnvLenient] replaces the defaults' pace with the one the
// environment sets, since a Limit paces by one or the other: a RATE clears
// their MinSpacing and Window, a MIN_DELAY their Rate and Window (over
// Adaptive defaults, a RATE is the learned pace's ceiling). A value that
// does not fit the defaults' other fields (a MIN_DELAY where they have a
// Store, a BURST not above their Reserve) falls back, and is reported. The
// Limit is named as the defaults name it, or else prefix in lower case.
package ratewise
