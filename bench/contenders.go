package bench

import (
	"net/http"
	"strings"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
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
	// The scenario's attempts and backoff, when it sets them, come after
	// the contender's options; a preset's are changed in it.
	rw := func(name string, told bool, opts func(Scenario) []ratewise.Option) Contender {
		return Contender{Name: name, Told: told, Client: func(base http.RoundTripper, s Scenario) *http.Client {
			o := opts(s)
			if s.retries() {
				o = append(o, ratewise.WithRetry(s.retryPolicy(ratewise.RetryPolicy{})))
			}
			return &http.Client{Transport: ratewise.New(base, o...)}
		}}
	}
	none := func(Scenario) []ratewise.Option { return nil }
	preset := func(p ratewise.Preset) Contender {
		return Contender{Name: "ratewise " + strings.ToUpper(p.Name[:1]) + p.Name[1:], Client: func(base http.RoundTripper, s Scenario) *http.Client {
			q := p
			q.Retry = s.retryPolicy(p.Retry)
			return &http.Client{Transport: ratewise.New(base, ratewise.WithPreset(q))}
		}}
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
		preset(ratewise.Conservative()),
		preset(ratewise.Moderate()),
		preset(ratewise.Aggressive()),
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
		{Name: "go-retryablehttp defaults", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return retryable(base, s)
		}},
		{Name: "failsafe-go retry, Retry-After, backoff", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(s))}
		}},
		{Name: "failsafe-go retry + adaptive throttler", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(s), failsafeThrottler(0))}
		}},
		{Name: "failsafe-go retry + adaptive throttler, K = 2", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(s), failsafeThrottler(2))}
		}},
		{Name: "failsafe-go retry + smooth limiter told the limit", Told: true, Kinds: []Kind{Bucket, Window},
			Client: func(base http.RoundTripper, s Scenario) *http.Client {
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(s), failsafeLimiter(s))}
			}},
		{Name: "failsafe-go retry + bulkhead told the limit", Told: true, Kinds: []Kind{Concurrency},
			Client: func(base http.RoundTripper, s Scenario) *http.Client {
				return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(s), failsafeBulkhead(s))}
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

// retries reports whether s sets the clients' attempts or backoff.
func (s Scenario) retries() bool { return s.Attempts > 0 || s.MaxBackoff > 0 }

// retryPolicy is p with the attempts and backoff s sets.
func (s Scenario) retryPolicy(p ratewise.RetryPolicy) ratewise.RetryPolicy {
	if s.Attempts > 0 {
		p.MaxAttempts = s.Attempts
	}
	if s.MaxBackoff > 0 {
		p.InitialDelay, p.MaxDelay = s.MinBackoff, s.MaxBackoff
	}
	return p
}

// retryable is go-retryablehttp's client with its defaults (4 retries,
// backoff from 1s to 30s that honours Retry-After on a 429 or 503), or
// the attempts and backoff s sets, but for its logger, which would print
// every retry.
func retryable(base http.RoundTripper, s Scenario) *http.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	if s.Attempts > 0 {
		c.RetryMax = s.Attempts - 1
	}
	if s.MaxBackoff > 0 {
		c.RetryWaitMin, c.RetryWaitMax = s.MinBackoff, s.MaxBackoff
	}
	return c.StandardClient()
}

// failsafeRetry is failsafe-go's HTTP retry policy, which honours
// Retry-After (in whole seconds), allowed 9 retries, ten attempts in all,
// and, where the server names no wait, the backoff go-retryablehttp has
// by default: 1 s doubling up to 30 s (without one, it retries at once);
// or the attempts and backoff s sets.
func failsafeRetry(s Scenario) retrypolicy.RetryPolicy[*http.Response] {
	retries, from, to := 9, time.Second, 30*time.Second
	if s.Attempts > 0 {
		retries = s.Attempts - 1
	}
	if s.MaxBackoff > 0 {
		from, to = s.MinBackoff, s.MaxBackoff
	}
	return failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(retries).WithBackoff(from, to).Build()
}

// failsafeThrottler is failsafe-go's adaptive throttler, Google's
// client-side throttling from the SRE book: an attempt is dropped
// locally with probability max(0, (requests − K·accepts)/(requests + 1))
// over the last minute, at most 0.9, where a refusal (429), a server
// error or no answer is not an accept. K = 0 keeps its default, a
// failure rate of 0.1 tolerated (K = 1/0.9); the book suggests K = 2.
// Inside the retry policy, a dropped attempt is retried after the
// backoff, as a refused one.
func failsafeThrottler(k float64) adaptivethrottler.AdaptiveThrottler[*http.Response] {
	b := adaptivethrottler.NewBuilder[*http.Response]().HandleIf(func(r *http.Response, err error) bool {
		return err != nil || r.StatusCode == http.StatusTooManyRequests || r.StatusCode >= 500
	})
	if k > 0 {
		b = b.WithFailureRateThreshold(1-1/k, 0, time.Minute)
	}
	return b.Build()
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
