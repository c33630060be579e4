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
// One call of RoundTrip, in the files that own each step: transport.go
// takes the call; call.go runs its attempts; for each attempt,
// call_admit.go takes it through the breaker (breaker*.go), the pause gate
// (pause.go) and every limit scope (limit*.go), waiting where they say
// (call_wait.go); it is sent; call_feedback.go tells what the response
// taught to the gate, the breaker and the pace; call_decide.go retries by
// the policy (policy.go, retryafter.go) or returns. The engines behind the
// stages sit in internal/ packages that know nothing of calls.
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
//   - [RateLimitError]: the server refused (a final 429); [LimitError]: the
//     client's own limit refused before sending ([ErrLimited]).
package ratewise
