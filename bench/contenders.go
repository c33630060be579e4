package bench

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/ratelimiter"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// Contenders are the clients every scenario runs: ratewise as a newcomer
// types it, its presets, its learned pace asked for by name and told the
// limit, and the peers as their users configure them.
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
	return []Contender{
		rw("ratewise defaults", false, none),
		rw("ratewise Conservative", false, preset(ratewise.Conservative())),
		rw("ratewise Moderate", false, preset(ratewise.Moderate())),
		rw("ratewise Aggressive", false, preset(ratewise.Aggressive())),
		rw("ratewise learned", false, func(Scenario) []ratewise.Option {
			return []ratewise.Option{ratewise.WithLimit(ratewise.Limit{Adaptive: true})}
		}),
		rw("ratewise told the limit", true, func(s Scenario) []ratewise.Option {
			return []ratewise.Option{ratewise.WithLimit(toldLimit(s))}
		}),
		{Name: "go-retryablehttp defaults", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return retryable(base)
		}},
		{Name: "failsafe-go retry, Retry-After, backoff", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry())}
		}},
		{Name: "failsafe-go retry + smooth limiter told the limit", Told: true, Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(), failsafeLimiter(s))}
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
// server's documentation: a bucket as it is; a fixed window of L per W as
// a Window; a sliding-window counter of L per W as an even pace of L − 1
// per W (at L per W, the last window's requests weighed in and the next
// one make L + 1).
func toldLimit(s Scenario) ratewise.Limit {
	switch {
	case !s.Windowed():
		return ratewise.Limit{Rate: rate.Limit(s.Rate), Burst: s.Burst}
	case s.Model == SlidingWindow:
		return ratewise.Limit{Rate: rate.Limit(float64(s.Limit-1) / s.Window.Seconds()), Burst: 1}
	}
	return ratewise.Limit{Burst: s.Limit, Window: s.Window}
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
	if s.Windowed() {
		n, per = uint(s.Limit), s.Window
	}
	return ratelimiter.NewSmoothBuilder[*http.Response](n, per).WithMaxWaitTime(time.Minute).Build()
}
