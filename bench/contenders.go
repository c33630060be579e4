package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// Contenders are the clients every scenario runs: ratewise as a newcomer
// types it, its presets, its learned pace asked for by name and turned
// off, told the limit, and the peers as their users configure them.
func Contenders() []Contender {
	rw := func(name string, told bool, opts func(Scenario) []ratewise.Option) Contender {
		return Contender{Name: name, Told: told, Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: ratewise.New(base, opts(s)...)}
		}}
	}
	none := func(Scenario) []ratewise.Option { return nil }
	preset := func(p ratewise.Preset) func(Scenario) []ratewise.Option {
		return func(Scenario) []ratewise.Option { return []ratewise.Option{ratewise.WithPreset(p)} }
	}
	// A window of L per W told as a rate instead, L/W a second, one at a
	// time: what to tell a sliding-window counter, beside telling it the
	// window (docs/learning.md weighs the two).
	asRate := rw("ratewise told the window as a rate", true, func(s Scenario) []ratewise.Option {
		return []ratewise.Option{ratewise.WithLimit(ratewise.Limit{Rate: rate.Limit(float64(s.Limit) / s.Window.Seconds()), Burst: 1})}
	})
	asRate.Kinds = []Kind{Window}
	return []Contender{
		rw("ratewise defaults", false, none),
		{Name: "ratewise defaults, WithStore", ForRun: func() Contender {
			// The replicas of a run share one store, as a fleet shares a
			// Redis: in process, a MemoryStore.
			shared := ratewise.NewMemoryStore()
			return rw("ratewise defaults, WithStore", false, func(Scenario) []ratewise.Option {
				return []ratewise.Option{ratewise.WithStore(shared)}
			})
		}},
		rw("ratewise Conservative", false, preset(ratewise.Conservative())),
		rw("ratewise Moderate", false, preset(ratewise.Moderate())),
		rw("ratewise Aggressive", false, preset(ratewise.Aggressive())),
		rw("ratewise learned", false, func(Scenario) []ratewise.Option {
			return []ratewise.Option{ratewise.WithLimit(ratewise.Limit{Adaptive: true})}
		}),
		rw(Baseline, false, func(Scenario) []ratewise.Option {
			return []ratewise.Option{ratewise.WithoutLearning()}
		}),
		rw("ratewise told the limit", true, func(s Scenario) []ratewise.Option {
			return []ratewise.Option{ratewise.WithLimit(toldLimit(s))}
		}),
		asRate,
		{Name: "go-retryablehttp defaults", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return retryable(base)
		}},
		{Name: "failsafe-go retry, Retry-After, backoff", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry())}
		}},
		{Name: "failsafe-go retry + smooth limiter told the limit", Told: true, Kinds: []Kind{Bucket, Window},
			Client: func(base http.RoundTripper, s Scenario) *http.Client {
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(), failsafeLimiter(s))}
			}},
		{Name: "failsafe-go retry + bulkhead told the limit", Told: true, Kinds: []Kind{Concurrency},
			Client: func(base http.RoundTripper, s Scenario) *http.Client {
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(), failsafeBulkhead(s))}
			}},
	}
}

// Plain is net/http with nothing above it: every refusal is a failed
// call. The tests count with it.
func Plain() Contender {
	return Contender{Name: "plain net/http", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
		return &http.Client{Transport: base}
	}}
}

// toldLimit is the limit of s as a ratewise user tells it from the
// server's documentation: a bucket as its rate and burst; every window of
// L per W, fixed, from the first request or sliding, as a Window of L per
// W, since that is what the documentation says (a sliding-window counter
// weighs the previous window's requests in, so it can refuse what a
// window of L per W lets through); a cap of N at once as MaxConcurrent.
// A load shedder has no limit to tell, and told contenders sit it out.
func toldLimit(s Scenario) ratewise.Limit {
	switch s.Kind() {
	case Window:
		return ratewise.Limit{Burst: s.Limit, Window: s.Window}
	case Concurrency:
		return ratewise.Limit{MaxConcurrent: s.Limit}
	}
	return ratewise.Limit{Rate: rate.Limit(s.Rate), Burst: s.Burst}
}

// retryable is go-retryablehttp's client with its defaults (4 retries,
// backoff from 1s to 30s that honours Retry-After on a 429 or 503), but
// for its logger, which would print every retry.
func retryable(base http.RoundTripper) *http.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	return c.StandardClient()
}

// failsafeRetry is failsafe-go's HTTP retry policy, which honours
// Retry-After (in whole seconds), allowed 9 retries, ten attempts in all,
// and, where the server names no wait, the backoff go-retryablehttp has
// by default: 1 s doubling up to 30 s. (Without one, it retries at once.)
func failsafeRetry() retrypolicy.RetryPolicy[*http.Response] {
	return failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(9).WithBackoff(time.Second, 30*time.Second).Build()
}

// failsafeLimiter is failsafe-go's smooth rate limiter told the limit of
// s, R a second or L per W, evenly spaced; a request waits up to a
// minute for its turn.
func failsafeLimiter(s Scenario) ratelimiter.RateLimiter[*http.Response] {
	n, per := uint(s.Rate), time.Second
	if s.Kind() == Window {
		n, per = uint(s.Limit), s.Window
	}
	return ratelimiter.NewSmoothBuilder[*http.Response](n, per).WithMaxWaitTime(time.Minute).Build()
}

// failsafeBulkhead is failsafe-go's bulkhead, its cap on executions at
// once, told the cap of s; an attempt waits up to a minute for a place.
func failsafeBulkhead(s Scenario) bulkhead.Bulkhead[*http.Response] {
	return bulkhead.NewBuilder[*http.Response](uint(s.Limit)).WithMaxWaitTime(time.Minute).Build()
}
