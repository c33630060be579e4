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
	// Rate is the number of requests per second the server admits: the
	// refill rate of its token bucket. Zero means no limit, and then no
	// rate-limit headers are sent since there is no limit to describe.
	Rate float64
	// Burst is the size of the token bucket. Zero means 1.
	Burst int
	// KeyHeader, when set, gives each value of this request header its own
	// bucket; requests without the header share one bucket. Empty means one
	// bucket for every request.
	KeyHeader string
	// RetryAfter says how a 429 tells the client when to come back. The zero
	// value is RetryAfterSeconds.
	RetryAfter RetryAfterMode
	// PublishHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (delta seconds) to every response.
	PublishHeaders bool
	// IETFHeaders adds RateLimit-Policy and RateLimit, in the structured-field
	// list form of the IETF draft, to every response.
	IETFHeaders bool
	// Latency is added before answering every request, 429s included.
	Latency time.Duration
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
	// before the latency, the bucket and any fault, and with its body read
	// in full; the handler can still read the body. Tests use it to check
	// what reached the server on every attempt. It is called from the
	// server's goroutines, concurrently.
	OnRequest func(r *http.Request, body []byte)
	// Seed seeds the random draws (faults and jitter) so that a run can be
	// repeated. Zero means a fixed default seed, so runs repeat by default.
	Seed uint64
	// Handler answers admitted requests. Nil means 200 with body "ok".
	Handler http.Handler
}

// RetryAfterMode says how a 429 tells the client when to come back. The
// zero value is RetryAfterSeconds.
type RetryAfterMode int

const (
	// RetryAfterSeconds sends Retry-After as whole seconds, rounded up, at
	// least 1.
	RetryAfterSeconds RetryAfterMode = iota
	// RetryAfterHTTPDate sends Retry-After as an IMF-fixdate ([http.TimeFormat])
	// rounded up to the next whole second.
	RetryAfterHTTPDate
	// RetryAfterNone sends no Retry-After header.
	RetryAfterNone
)

// String returns the constant's name, such as "RetryAfterSeconds".
func (m RetryAfterMode) String() string {
	switch m {
	case RetryAfterSeconds:
		return "RetryAfterSeconds"
	case RetryAfterHTTPDate:
		return "RetryAfterHTTPDate"
	case RetryAfterNone:
		return "RetryAfterNone"
	}
	return fmt.Sprintf("RetryAfterMode(%d)", int(m))
}

func (m RetryAfterMode) valid() bool {
	return m >= RetryAfterSeconds && m <= RetryAfterNone
}

// Fault is a failure the server injects in place of the handler's answer.
type Fault int

const (
	// Fault503 answers 503 Service Unavailable with an empty body and no
	// Retry-After.
	Fault503 Fault = iota
	// FaultReset resets the connection before any byte of a response is
	// sent, so the client gets a network error and no response. Note that
	// [http.Transport] may retry an idempotent request once after a reset on
	// a reused connection, so the server can receive more requests than the
	// client sent.
	FaultReset
	// Fault429 answers 429 with a Retry-After of Config.FaultRetryAfter,
	// in the form Config.RetryAfter says, as an API does when another of
	// its limits (not this server's bucket) refuses.
	Fault429
	// Fault429NoHint answers 429 with no Retry-After nor any rate-limit
	// header: the client must back off on its own.
	Fault429NoHint
	// FaultResetAfterHeaders sends 200 headers and half of a body of
	// FaultBodySize bytes, then resets the connection: the client gets a
	// response whose body read fails.
	FaultResetAfterHeaders
	// FaultTruncatedBody sends 200 with a Content-Length of FaultBodySize
	// and half of the body, then closes the connection: the body read ends
	// in io.ErrUnexpectedEOF.
	FaultTruncatedBody
	// FaultSlowBody sends 200 and a body of FaultBodySize bytes in four
	// pieces, Config.SlowBodyDelay apart.
	FaultSlowBody
)

// FaultBodySize is the length of the 200 body the body faults send or
// announce.
const FaultBodySize = 1024

// allFaults is what an empty Config.Faults means.
var allFaults = []Fault{Fault503, FaultReset, Fault429, Fault429NoHint, FaultResetAfterHeaders, FaultTruncatedBody, FaultSlowBody}

// String returns the constant's name, such as "Fault503".
func (f Fault) String() string {
	switch f {
	case Fault503:
		return "Fault503"
	case FaultReset:
		return "FaultReset"
	case Fault429:
		return "Fault429"
	case Fault429NoHint:
		return "Fault429NoHint"
	case FaultResetAfterHeaders:
		return "FaultResetAfterHeaders"
	case FaultTruncatedBody:
		return "FaultTruncatedBody"
	case FaultSlowBody:
		return "FaultSlowBody"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

func (f Fault) valid() bool {
	return f >= Fault503 && f <= FaultSlowBody
}

// Validate reports every invalid field of c in one error, or nil when c can
// start a server.
func (c Config) Validate() error {
	var bad []string
	if c.Rate < 0 || math.IsNaN(c.Rate) || math.IsInf(c.Rate, 0) {
		bad = append(bad, fmt.Sprintf("Rate is %v; use 0 for no limit or a finite positive rate", c.Rate))
	}
	if c.Burst < 0 {
		bad = append(bad, fmt.Sprintf("Burst is %d; use 0 for the default of 1 or a positive size", c.Burst))
	}
	if !c.RetryAfter.valid() {
		bad = append(bad, fmt.Sprintf("RetryAfter is %v; use RetryAfterSeconds, RetryAfterHTTPDate or RetryAfterNone", c.RetryAfter))
	}
	if c.Latency < 0 {
		bad = append(bad, fmt.Sprintf("Latency is %v; use 0 or more", c.Latency))
	}
	if c.LatencyJitter < 0 {
		bad = append(bad, fmt.Sprintf("LatencyJitter is %v; use 0 or more", c.LatencyJitter))
	}
	// The negated form also catches NaN.
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

// burst returns the bucket size with the default applied.
func (c Config) burst() int {
	if c.Burst == 0 {
		return 1
	}
	return c.Burst
}

// faults returns the faults to draw from with the default applied.
func (c Config) faults() []Fault {
	if len(c.Faults) == 0 {
		return allFaults
	}
	return c.Faults
}
