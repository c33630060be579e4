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

// Contenders are the clients every scenario runs: the peers as their users
// configure them, and ratewise.
func Contenders() []Contender {
	return []Contender{
		{Name: "plain net/http", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: base}
		}},
		{Name: "go-retryablehttp defaults", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return retryable(base, 4)
		}},
		{Name: "go-retryablehttp RetryMax 10", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return retryable(base, 10)
		}},
		{Name: "failsafe-go retry, Retry-After", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry())}
		}},
		{Name: "failsafe-go retry + limiter told the limit", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			limiter := ratelimiter.NewSmoothBuilder[*http.Response](uint(s.Rate), time.Second).WithMaxWaitTime(time.Minute).Build()
			return &http.Client{Transport: failsafehttp.NewRoundTripper(base, failsafeRetry(), limiter)}
		}},
		{Name: "ratewise defaults (retry + cooldown)", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: ratewise.New(base, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 10}))}
		}},
		{Name: "ratewise adaptive", Client: func(base http.RoundTripper, _ Scenario) *http.Client {
			return &http.Client{Transport: ratewise.New(base, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 10}),
				ratewise.WithLimit(ratewise.Limit{Adaptive: true}))}
		}},
		{Name: "ratewise told the limit", Client: func(base http.RoundTripper, s Scenario) *http.Client {
			return &http.Client{Transport: ratewise.New(base, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 10}),
				ratewise.WithLimit(ratewise.Limit{Rate: rate.Limit(s.Rate), Burst: s.Burst}))}
		}},
	}
}

func retryable(base http.RoundTripper, retryMax int) *http.Client {
	c := retryablehttp.NewClient()
	c.HTTPClient = &http.Client{Transport: base}
	c.Logger = nil
	c.RetryMax = retryMax
	return c.StandardClient()
}

// failsafeRetry is failsafe-go's HTTP retry policy, which honours
// Retry-After, allowed as many retries as the others.
func failsafeRetry() retrypolicy.RetryPolicy[*http.Response] {
	return failsafehttp.NewRetryPolicyBuilder().WithMaxRetries(9).Build()
}
