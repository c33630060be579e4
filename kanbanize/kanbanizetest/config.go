package kanbanizetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// DefaultAPIKey is the key a [Server] accepts when Config.APIKey is empty.
const DefaultAPIKey = "test-api-key"

// DefaultCards is the number of fixtures a [Server] serves when
// Config.Cards is nil: [Fixtures](DefaultCards).
const DefaultCards = 50

// Config describes a fake Kanbanize API. The zero Config serves
// Fixtures(50) to the key "test-api-key", without limits, latency or
// faults.
type Config struct {
	// APIKey is the key the server accepts in the apikey header. Empty
	// means DefaultAPIKey.
	APIKey string
	// APIKeys are more keys the server accepts, besides APIKey: the keys
	// of other users of the same account.
	APIKeys []string
	// PerAccount makes the limits the account's: every accepted key
	// takes from one pair of buckets, so that one key's requests can get
	// another refused. False keeps a pair of buckets per key. Nothing
	// public says which the real API does.
	PerAccount bool
	// Cards are the fixtures served. Nil means Fixtures(DefaultCards); an
	// empty, non-nil slice means no cards at all. New copies them and
	// serves them as given: it does not recompute the subtask counts.
	Cards []CardFixture
	// PerMinute is the number of requests admitted per minute per API key
	// (per account with PerAccount): a token bucket refilled at PerMinute
	// per 60s, holding up to PerMinute tokens. Zero means no per-minute
	// limit.
	PerMinute int
	// PerHour is the number of requests admitted per hour per API key,
	// likewise. Zero means no per-hour limit. A request must pass both
	// buckets, and a refusal takes a token from neither.
	PerHour int
	// TimeScale runs the limits' windows this many times faster, for demos
	// in real time: with 20, the per-minute limit refills its quota every
	// 3 seconds and the per-hour one every 3 minutes. Zero means 1.
	TimeScale float64
	// RetryAfter says how a refusal tells the client when to come back.
	// The zero value, RetryAfterNone, sends no Retry-After, as nothing
	// public says the real API sends one: ask for RetryAfterSeconds or
	// RetryAfterHTTPDate to test a client's handling of the header.
	RetryAfter RetryAfterMode
	// RL02 answers rate-limit refusals as some accounts get them: status
	// 400 with error code "RL02" instead of 429 with code "RL01".
	RL02 bool
	// Latency is waited out before every answer. A request whose context
	// ends during the wait gets no answer.
	Latency time.Duration
	// Scripts gives endpoints a fault script: the n-th request with a valid
	// key to endpoint e (counting all cards, from 0) gets Scripts[e][n]
	// instead of normal service while the script lasts, and normal service
	// after. FaultNone in a script serves that request normally.
	Scripts map[Endpoint][]Fault
}

// RetryAfterMode says how a rate-limit refusal tells the client when to
// come back. The zero value is RetryAfterNone: the refusal says nothing,
// as far as anything public tells of the real API.
type RetryAfterMode int

const (
	// RetryAfterNone sends no Retry-After header: the client learns only
	// the status and the error code. It is the zero value.
	RetryAfterNone RetryAfterMode = iota
	// RetryAfterSeconds sends Retry-After as whole seconds, rounded up, at
	// least 1.
	RetryAfterSeconds
	// RetryAfterHTTPDate sends Retry-After as an IMF-fixdate
	// ([http.TimeFormat]) rounded up to a whole second.
	RetryAfterHTTPDate
)

// String returns the constant's name, such as "RetryAfterSeconds".
func (m RetryAfterMode) String() string {
	switch m {
	case RetryAfterNone:
		return "RetryAfterNone"
	case RetryAfterSeconds:
		return "RetryAfterSeconds"
	case RetryAfterHTTPDate:
		return "RetryAfterHTTPDate"
	}
	return fmt.Sprintf("RetryAfterMode(%d)", int(m))
}

// Fault is an answer a script puts in place of normal service. Scripted
// faults are decided before the rate limiter and take no token.
type Fault int

const (
	// FaultNone serves the request normally. It is the zero value.
	FaultNone Fault = iota
	// Fault429 answers 429 with error code RL01 and the configured
	// Retry-After (none by default), at least a second away.
	Fault429
	// FaultRL02 answers 400 with error code RL02 and the configured
	// Retry-After (none by default), at least a second away.
	FaultRL02
	// Fault503 answers 503 with an empty body and no headers of its own.
	Fault503
	// FaultMalformedJSON answers 200 with the first half of the normal
	// body, which is not valid JSON.
	FaultMalformedJSON
	// FaultReset drops the connection without an answer. On loopback the
	// client gets a network error; in-process the RoundTripper returns an
	// error wrapping [io.ErrUnexpectedEOF].
	FaultReset
)

// String returns the constant's name, such as "Fault429".
func (f Fault) String() string {
	switch f {
	case FaultNone:
		return "FaultNone"
	case Fault429:
		return "Fault429"
	case FaultRL02:
		return "FaultRL02"
	case Fault503:
		return "Fault503"
	case FaultMalformedJSON:
		return "FaultMalformedJSON"
	case FaultReset:
		return "FaultReset"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Endpoint names one of the paths the fake serves.
type Endpoint string

const (
	// EndpointCard is GET /api/v2/cards/{card_id}.
	EndpointCard Endpoint = "card"
	// EndpointComments is GET /api/v2/cards/{card_id}/comments.
	EndpointComments Endpoint = "comments"
	// EndpointSubtasks is GET /api/v2/cards/{card_id}/subtasks.
	EndpointSubtasks Endpoint = "subtasks"
	// EndpointAPILimits is GET /api/v2/apiLimits, which tells the
	// account its limits (see [Server]).
	EndpointAPILimits Endpoint = "api_limits"
)

// endpoints lists every Endpoint, in the order of the API's paths.
var endpoints = []Endpoint{EndpointCard, EndpointComments, EndpointSubtasks, EndpointAPILimits}

// String returns the endpoint's name, such as "comments", or a quoted form
// such as `Endpoint("cards")` for a value that names no endpoint.
func (e Endpoint) String() string {
	if e.valid() {
		return string(e)
	}
	return fmt.Sprintf("Endpoint(%q)", string(e))
}

func (e Endpoint) valid() bool {
	return e == EndpointCard || e == EndpointComments || e == EndpointSubtasks || e == EndpointAPILimits
}

// Validate reports every invalid field of c in one error, or nil when c
// can make a server.
func (c Config) Validate() error {
	var bad []string
	if c.PerMinute < 0 {
		bad = append(bad, fmt.Sprintf("PerMinute is %d; use 0 for no limit or a positive count", c.PerMinute))
	}
	if c.TimeScale < 0 || math.IsNaN(c.TimeScale) || math.IsInf(c.TimeScale, 0) {
		bad = append(bad, fmt.Sprintf("TimeScale is %v; use 0 for real time or a positive factor", c.TimeScale))
	}
	if c.PerHour < 0 {
		bad = append(bad, fmt.Sprintf("PerHour is %d; use 0 for no limit or a positive count", c.PerHour))
	}
	if c.RetryAfter < RetryAfterNone || c.RetryAfter > RetryAfterHTTPDate {
		bad = append(bad, fmt.Sprintf("RetryAfter is %v; use RetryAfterNone, RetryAfterSeconds or RetryAfterHTTPDate", c.RetryAfter))
	}
	for i, k := range c.APIKeys {
		if k == "" {
			bad = append(bad, fmt.Sprintf("APIKeys[%d] is empty; give each key its value", i))
		}
	}
	if c.Latency < 0 {
		bad = append(bad, fmt.Sprintf("Latency is %v; use 0 or more", c.Latency))
	}
	bad = append(bad, c.scriptProblems()...)
	bad = append(bad, c.cardProblems()...)
	if len(bad) == 0 {
		return nil
	}
	return errors.New("kanbanizetest: invalid Config: " + strings.Join(bad, "; "))
}

func (c Config) scriptProblems() []string {
	var bad []string
	keys := make([]string, 0, len(c.Scripts))
	for e := range c.Scripts {
		keys = append(keys, string(e))
	}
	sort.Strings(keys) // so the message does not change from run to run
	for _, k := range keys {
		e := Endpoint(k)
		if !e.valid() {
			bad = append(bad, fmt.Sprintf("Scripts has the key %q; use EndpointCard, EndpointComments, EndpointSubtasks or EndpointAPILimits", k))
			continue
		}
		for i, f := range c.Scripts[e] {
			if f < FaultNone || f > FaultReset {
				bad = append(bad, fmt.Sprintf("Scripts[%s][%d] is %v; use one of the Fault constants", e, i, f))
			}
		}
	}
	return bad
}

func (c Config) cardProblems() []string {
	var bad []string
	seen := make(map[int]int, len(c.Cards))
	for i, fx := range c.Cards {
		id := fx.Card.CardID
		if id <= 0 {
			bad = append(bad, fmt.Sprintf("Cards[%d] has card_id %d; use a positive ID", i, id))
		} else if j, dup := seen[id]; dup {
			bad = append(bad, fmt.Sprintf("Cards[%d] has card_id %d, like Cards[%d]; give each card its own ID", i, id, j))
		} else {
			seen[id] = i
		}
		if _, err := json.Marshal(fx.Card); err != nil {
			bad = append(bad, fmt.Sprintf("Cards[%d].Card cannot be encoded: %v", i, err))
		}
	}
	return bad
}
