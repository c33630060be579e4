package ratewisetest

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"
)

// Config describes a fake rate-limited server. The zero Config is a server
// without a limit that answers every request 200 with body "ok".
type Config struct {
	// Model is how the server counts requests: a bucket refilled at Rate
	// (TokenBucket, LeakyBucket), a count of at most Limit per Window
	// (FixedWindow, FixedWindowFromFirst, SlidingWindow), at most Limit
	// served at once (ConcurrencyCap) or a share Shed refused at any rate
	// (LoadShed). The zero value is TokenBucket.
	Model Model
	// Rate is the number of requests per second the bucket models admit:
	// the refill rate of a token bucket, the drain rate of a leaky one.
	// Zero with TokenBucket means no limit, and then no rate-limit headers
	// are sent since there is no limit to describe. LeakyBucket needs a
	// positive Rate; the other models take none.
	Rate float64
	// Burst is, for TokenBucket, the size of the bucket; zero means 1. For
	// LeakyBucket it is nginx's burst: how many requests beyond the one
	// the rate allows are queued (or, with NoDelay, let through at once);
	// zero means none, as in nginx. The other models take none.
	Burst int
	// NoDelay makes a LeakyBucket answer the requests within its Burst at
	// once rather than queue them, as nginx's nodelay does. It is only for
	// LeakyBucket.
	NoDelay bool
	// Limit is the number of requests the window models admit per Window,
	// and the number of a key's requests ConcurrencyCap serves at once.
	// They need a positive Limit; the other models take none.
	Limit int
	// Window is the length of the window models' windows. They need a
	// positive Window; the other models take none.
	Window time.Duration
	// Shed is the share of requests LoadShed refuses, in [0, 1): each
	// request is refused with this probability, whatever the rate. It is
	// only for LoadShed; zero refuses none.
	Shed float64
	// KeyHeader, when set, gives each value of this request header its own
	// bucket or window; requests without the header share one. Empty means
	// one for every request.
	KeyHeader string
	// RetryAfter says how a refusal tells the client when to come back.
	// The zero value is RetryAfterSeconds. ConcurrencyCap and LoadShed
	// know no such time: they send Retry-After only when
	// RefusalRetryAfter names a wait, written as RetryAfter says.
	RetryAfter RetryAfterMode
	// RefusalRetryAfter is the wait a refusal of ConcurrencyCap or
	// LoadShed names in Retry-After. Zero means no Retry-After, as go-chi's
	// Throttle and nginx's limit_conn send none. It is only for those two
	// models: the others name the wait their count gives.
	RefusalRetryAfter time.Duration
	// RefusalStatus is the status of a request the limit refuses. Zero
	// means 429 Too Many Requests; nginx's limit_req refuses with 503.
	RefusalStatus int
	// HTMLRefusal makes a refusal an HTML error page, as a proxy such as
	// nginx sends, with no Retry-After and no rate-limit header at all:
	// the client learns nothing but the status. Admitted requests still
	// carry the headers PublishHeaders and IETFHeaders ask for.
	HTMLRefusal bool
	// PublishHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, written as Reset says, to every response.
	PublishHeaders bool
	// Reset says how X-RateLimit-Reset is written. The zero value is
	// ResetSeconds.
	Reset ResetFormat
	// IETFHeaders adds RateLimit-Policy and RateLimit, in the structured-field
	// list form of the IETF draft, to every response.
	IETFHeaders bool
	// Latency is added before answering every request, refusals included,
	// before the request meets the limit.
	Latency time.Duration
	// ServiceTime is how long the server takes to serve a request the
	// limit admits, whatever the model: after the limit (and a queued
	// LeakyBucket's wait) the request holds its place this long, then the
	// handler or a fault answers it. Under ConcurrencyCap that place is
	// one of the Limit, held until the answer; under the other models the
	// answer only comes later. Refusals do not wait it. Zero means none.
	ServiceTime time.Duration
	// LatencyJitter adds up to this much more latency, drawn uniformly.
	LatencyJitter time.Duration
	// FaultRate is the probability, in [0, 1], that an admitted request gets
	// a fault instead of the handler.
	FaultRate float64
	// Faults are the faults drawn from, uniformly. Empty with FaultRate > 0
	// means all of them.
	Faults []Fault
	// FaultRetryAfter is the wait Fault429 asks for, written as
	// RetryAfter says. Zero means one second.
	FaultRetryAfter time.Duration
	// SlowBodyDelay is the pause between the pieces of a FaultSlowBody
	// answer. Zero means 20ms.
	SlowBodyDelay time.Duration
	// OnRequest, when set, is called with every request as it arrives,
	// before the latency, the limit and any fault, and with its body read
	// in full; the handler can still read the body. Tests use it to check
	// what reached the server on every attempt. It is called from the
	// server's goroutines, concurrently.
	OnRequest func(r *http.Request, body []byte)
	// Seed seeds the random draws (faults, jitter and LoadShed's
	// refusals), each from its own stream, so that a run can be repeated.
	// Zero means a fixed default seed, so runs repeat by default.
	Seed uint64
	// Handler answers admitted requests. Nil means 200 with body "ok".
	Handler http.Handler
}

// Validate reports every invalid field of c in one error, or nil when c can
// start a server.
func (c Config) Validate() error {
	var bad []string
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		bad = append(bad, fmt.Sprintf("Rate is %v; use 0 for no limit or a finite positive rate", c.Rate))
	}
	if c.Burst < 0 {
		bad = append(bad, fmt.Sprintf("Burst is %d; use 0 for the default or a positive size", c.Burst))
	}
	if c.Model.valid() {
		bad = c.Model.check(c, bad)
	} else {
		bad = append(bad, fmt.Sprintf("Model is %v; use TokenBucket, LeakyBucket, FixedWindow, FixedWindowFromFirst, SlidingWindow, ConcurrencyCap or LoadShed", c.Model))
	}
	if !c.RetryAfter.valid() {
		bad = append(bad, fmt.Sprintf("RetryAfter is %v; use RetryAfterSeconds, RetryAfterHTTPDate, RetryAfterNone or RetryAfterWindow", c.RetryAfter))
	}
	if !c.Reset.valid() {
		bad = append(bad, fmt.Sprintf("Reset is %v; use ResetSeconds, ResetUnix or ResetDuration", c.Reset))
	}
	if c.RefusalStatus != 0 && (c.RefusalStatus < 400 || c.RefusalStatus > 599) {
		bad = append(bad, fmt.Sprintf("RefusalStatus is %d; use 0 for 429 or a status from 400 to 599", c.RefusalStatus))
	}
	if c.Latency < 0 {
		bad = append(bad, fmt.Sprintf("Latency is %v; use 0 or more", c.Latency))
	}
	if c.LatencyJitter < 0 {
		bad = append(bad, fmt.Sprintf("LatencyJitter is %v; use 0 or more", c.LatencyJitter))
	}
	if c.ServiceTime < 0 {
		bad = append(bad, fmt.Sprintf("ServiceTime is %v; use 0 for none or more", c.ServiceTime))
	}
	// The negated forms also catch NaN.
	if !(c.Shed >= 0 && c.Shed < 1) {
		bad = append(bad, fmt.Sprintf("Shed is %v; use a share in [0, 1)", c.Shed))
	}
	if c.RefusalRetryAfter < 0 {
		bad = append(bad, fmt.Sprintf("RefusalRetryAfter is %v; use 0 for no Retry-After or more", c.RefusalRetryAfter))
	}
	if !(c.FaultRate >= 0 && c.FaultRate <= 1) {
		bad = append(bad, fmt.Sprintf("FaultRate is %v; use a probability in [0, 1]", c.FaultRate))
	}
	for i, f := range c.Faults {
		if !f.valid() {
			bad = append(bad, fmt.Sprintf("Faults[%d] is %v; use one of the Fault constants", i, f))
		}
	}
	if c.FaultRetryAfter < 0 {
		bad = append(bad, fmt.Sprintf("FaultRetryAfter is %v; use 0 for the default of 1s or more", c.FaultRetryAfter))
	}
	if c.SlowBodyDelay < 0 {
		bad = append(bad, fmt.Sprintf("SlowBodyDelay is %v; use 0 for the default of 20ms or more", c.SlowBodyDelay))
	}
	if len(bad) == 0 {
		return nil
	}
	return errors.New("ratewisetest: invalid Config: " + strings.Join(bad, "; "))
}

// limited reports whether c keeps a limit at all.
func (c Config) limited() bool {
	return c.Model != TokenBucket || c.Rate > 0
}

// seed returns the seed of the random streams with the default applied.
func (c Config) seed() uint64 {
	if c.Seed == 0 {
		return defaultSeed
	}
	return c.Seed
}

// burst returns the token bucket's size with the default applied.
func (c Config) burst() int {
	if c.Burst == 0 {
		return 1
	}
	return c.Burst
}

// refusalStatus returns the status of a refusal with the default applied.
func (c Config) refusalStatus() int {
	if c.RefusalStatus == 0 {
		return http.StatusTooManyRequests
	}
	return c.RefusalStatus
}

// faults returns the faults to draw from with the default applied.
func (c Config) faults() []Fault {
	if len(c.Faults) == 0 {
		return allFaults
	}
	return c.Faults
}
