package ratewise

import "context"

// callOptions is what a request's context carries for the transport: its
// stats, wait budget, priority, retry policy, trace and endpoint label. They travel in one context
// value so that RoundTrip finds them all with a single lookup.
type callOptions struct {
	stats    *CallStats
	budget   *budget
	priority Priority
	retry    *RetryPolicy // with defaults filled in; nil means the transport's
	retryErr error        // why the policy given to WithRetryPolicy is invalid
	trace    *Trace
	endpoint string
}

type callOptionsKey struct{}

// optionsFrom returns the options ctx carries, or nil.
func optionsFrom(ctx context.Context) *callOptions {
	o, _ := ctx.Value(callOptionsKey{}).(*callOptions)
	return o
}

// withOptions returns a context carrying a copy of ctx's options changed
// by set; ctx's own are left as they are.
func withOptions(ctx context.Context, set func(*callOptions)) context.Context {
	return withOptionsIn(ctx, new(callOptions), set)
}

// withOptionsIn is withOptions with o, which the caller allocated, as the
// copy.
func withOptionsIn(ctx context.Context, o *callOptions, set func(*callOptions)) context.Context {
	if parent := optionsFrom(ctx); parent != nil {
		*o = *parent
	}
	set(o)
	return context.WithValue(ctx, callOptionsKey{}, o)
}

// Priority ranks a request against others of the same key when a limit is
// tight: see [Limit.Reserve] and [Limit.MaxConcurrent]. The zero value is
// PriorityNormal.
type Priority int8

const (
	// PriorityLow requests must leave a Limit's Reserve tokens unspent and
	// queue behind the others for a concurrency slot: background work.
	PriorityLow Priority = -1
	// PriorityNormal is the default.
	PriorityNormal Priority = 0
	// PriorityHigh requests go first in the queue for a concurrency slot:
	// a user waiting on the answer.
	PriorityHigh Priority = 1
)

// String returns "low", "normal" or "high".
func (p Priority) String() string {
	switch {
	case p < PriorityNormal:
		return "low"
	case p > PriorityNormal:
		return "high"
	}
	return "normal"
}

// WithPriority returns a context whose requests have priority p.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return withOptions(ctx, func(o *callOptions) { o.priority = p })
}

// WithRetryPolicy returns a context whose requests retry by p instead of
// the transport's policy: a user-facing call may retry twice where a
// background job retries five times. Zero fields of p take their defaults,
// not the transport's values. An invalid p makes every request made with
// the context fail with p's validation error.
func WithRetryPolicy(ctx context.Context, p RetryPolicy) context.Context {
	prepared, err := p.prepared()
	return withOptions(ctx, func(o *callOptions) { o.retry, o.retryErr = prepared, err })
}
