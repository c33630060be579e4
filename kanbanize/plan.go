package kanbanize

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// Plan is a Kanbanize account plan, whose API limits differ: one of the
// published plans (PlanStandard, PlanLarge, PlanExtraLarge), a custom
// plan of its own numbers (CustomPlan, written "45/700"), or PlanAuto,
// whose limits the client reads from the API. The zero Plan is no plan:
// the client's transport learns the limits from the API's refusals.
type Plan string

// The published plans, with their limits ("API and Data Limits", in the
// Businessmap knowledge base), and PlanAuto.
const (
	PlanStandard   Plan = "standard"    // 30 requests a minute, 600 an hour
	PlanLarge      Plan = "large"       // 60 a minute, 900 an hour
	PlanExtraLarge Plan = "extra-large" // 100 a minute, 1200 an hour
	// PlanAuto reads the account's limits from GET /api/v2/apiLimits when
	// the client first calls the API, and paces under them; when the
	// endpoint cannot tell them, the transport learns them from the
	// API's refusals, as with no plan. See WithPlan.
	PlanAuto Plan = "auto"
)

// Limits are an account's API limits: the requests it may send in a
// minute and in an hour. A zero field is no limit of that window.
type Limits struct {
	PerMinute int `json:"per_minute"`
	PerHour   int `json:"per_hour"`
}

// maxLimit bounds a custom plan's numbers, far above any plan's.
const maxLimit = 1_000_000

var planLimits = map[Plan]Limits{
	PlanStandard:   {30, 600},
	PlanLarge:      {60, 900},
	PlanExtraLarge: {100, 1200},
}

// CustomPlan returns the plan of an account whose limits are perMinute
// requests a minute and perHour an hour, written "45/700": the plan of a
// custom contract, whose numbers no published plan has. WithPlan and
// PlanLimits refuse it unless both numbers are within 1 to 1,000,000.
func CustomPlan(perMinute, perHour int) Plan {
	return Plan(strconv.Itoa(perMinute) + "/" + strconv.Itoa(perHour))
}

// Limits returns the limits of a published or custom plan, and false for
// PlanAuto, whose limits the API tells, and for a plan it does not know.
func (p Plan) Limits() (Limits, bool) {
	if l, ok := planLimits[p]; ok {
		return l, true
	}
	l, err := parseCustom(string(p))
	return l, err == nil
}

// parseCustom reads "45/700", spaces allowed around the numbers, and the
// knowledge base's "45m/700h".
func parseCustom(s string) (Limits, error) {
	minute, hour, ok := strings.Cut(s, "/")
	if !ok {
		return Limits{}, errors.New("not of the form per-minute/per-hour")
	}
	m, errM := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(minute), "m"))
	h, errH := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(hour), "h"))
	if errM != nil || errH != nil {
		return Limits{}, errors.New("its numbers are not whole numbers")
	}
	if m < 1 || m > maxLimit || h < 1 || h > maxLimit {
		return Limits{}, fmt.Errorf("its numbers must be within 1 to %d", maxLimit)
	}
	return Limits{PerMinute: m, PerHour: h}, nil
}

// ParsePlan reads a plan: standard, large, extra-large (or extra_large,
// extralarge, xl), auto, in any case, or a custom plan's limits as
// "45/700" (45 requests a minute, 700 an hour; "45m/700h" too).
func ParsePlan(s string) (Plan, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "standard":
		return PlanStandard, nil
	case "large":
		return PlanLarge, nil
	case "extra-large", "extra_large", "extralarge", "xl":
		return PlanExtraLarge, nil
	case "auto":
		return PlanAuto, nil
	}
	if strings.Contains(v, "/") {
		l, err := parseCustom(v)
		if err != nil {
			return "", fmt.Errorf("kanbanize: the custom plan %q: %v: write it like 45/700, 45 requests a minute and 700 an hour", s, err)
		}
		return CustomPlan(l.PerMinute, l.PerHour), nil
	}
	return "", fmt.Errorf("kanbanize: unknown plan %q: want standard, large, extra-large, auto, or a custom plan's limits like 45/700", s)
}

// PlanLimits returns the ratewise limit scopes of a published or custom
// plan: one per minute and one per hour, token buckets as large as each
// window's quota, for requests that carry an apikey header, a bucket per
// (hashed) key. Give each to ratewise.WithLimit or Transport.AddLimit, or
// the plan to WithPlan. PlanAuto has no scopes of its own.
func PlanLimits(p Plan) ([]ratewise.Limit, error) {
	if p == PlanAuto {
		return nil, errors.New("kanbanize: PlanLimits(auto): the auto plan's limits are read from the API (GET /api/v2/apiLimits) by the client: give the plan to WithPlan")
	}
	l, ok := p.Limits()
	if !ok {
		if strings.Contains(string(p), "/") {
			_, err := parseCustom(string(p))
			return nil, fmt.Errorf("kanbanize: the custom plan %q: %v: make it with CustomPlan(perMinute, perHour)", p, err)
		}
		return nil, fmt.Errorf("kanbanize: unknown plan %q: want %s, %s, %s, %s or a CustomPlan", p, PlanStandard, PlanLarge, PlanExtraLarge, PlanAuto)
	}
	return limitScopes("kanbanize "+string(p), l, hasAPIKey), nil
}

// limitScopes returns the scopes of limits l: "<name> per minute" and
// "<name> per hour", keyed by API key, applying to the requests applies
// picks. A window of zero has a scope that limits nothing (rate.Inf), so
// that a later SetLimit can give it a limit.
func limitScopes(name string, l Limits, applies func(*http.Request) bool) []ratewise.Limit {
	key := ratewise.ByHeader("apikey")
	return []ratewise.Limit{
		{Name: name + " per minute", Key: key, Applies: applies, Rate: windowRate(l.PerMinute, time.Minute), Burst: max(l.PerMinute, 1)},
		{Name: name + " per hour", Key: key, Applies: applies, Rate: windowRate(l.PerHour, time.Hour), Burst: max(l.PerHour, 1)},
	}
}

// windowRate is the refill rate of a bucket of n per window, rate.Inf
// for no limit.
func windowRate(n int, window time.Duration) rate.Limit {
	if n <= 0 {
		return rate.Inf
	}
	return rate.Every(window / time.Duration(n))
}

// apiKeyHeader is the apikey header's name as http.Header keeps it.
var apiKeyHeader = http.CanonicalHeaderKey("apikey")

// hasAPIKey picks the requests a plan limits: those carrying an API key.
func hasAPIKey(req *http.Request) bool {
	v := req.Header[apiKeyHeader]
	return len(v) > 0 && v[0] != ""
}
