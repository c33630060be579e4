package kanbanize

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// Plan is a Kanbanize account plan, whose published API limits differ.
type Plan string

// The plans and their limits.
const (
	PlanStandard   Plan = "standard"    // 30 requests a minute, 600 an hour
	PlanLarge      Plan = "large"       // 60 a minute, 900 an hour
	PlanExtraLarge Plan = "extra-large" // 100 a minute, 1200 an hour
)

var planLimits = map[Plan]struct{ perMinute, perHour int }{
	PlanStandard:   {30, 600},
	PlanLarge:      {60, 900},
	PlanExtraLarge: {100, 1200},
}

// ParsePlan reads a plan name: standard, large, extra-large (or
// extra_large, extralarge, xl), in any case.
func ParsePlan(s string) (Plan, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "standard":
		return PlanStandard, nil
	case "large":
		return PlanLarge, nil
	case "extra-large", "extra_large", "extralarge", "xl":
		return PlanExtraLarge, nil
	}
	return "", fmt.Errorf("kanbanize: unknown plan %q: want standard, large or extra-large", s)
}

// PlanLimits returns the ratewise limit scopes of a plan: one per minute
// and one per hour, each a token bucket as large as the window's quota,
// kept per API key (hashed: the key never shows in statuses or errors).
// They apply only to requests that carry an apikey header, so that a
// transport shared with other APIs paces nothing else by them. Give each
// to ratewise.WithLimit or Transport.AddLimit, or the plan to WithPlan.
func PlanLimits(p Plan) ([]ratewise.Limit, error) {
	l, ok := planLimits[p]
	if !ok {
		return nil, fmt.Errorf("kanbanize: unknown plan %q: want %s, %s or %s", p, PlanStandard, PlanLarge, PlanExtraLarge)
	}
	key := ratewise.ByHeader("apikey")
	return []ratewise.Limit{
		{Name: fmt.Sprintf("kanbanize %s per minute", p), Rate: rate.Every(time.Minute / time.Duration(l.perMinute)), Burst: l.perMinute,
			Key: key, Applies: hasAPIKey},
		{Name: fmt.Sprintf("kanbanize %s per hour", p), Rate: rate.Every(time.Hour / time.Duration(l.perHour)), Burst: l.perHour,
			Key: key, Applies: hasAPIKey},
	}, nil
}

// apiKeyHeader is the apikey header's name as http.Header keeps it.
var apiKeyHeader = http.CanonicalHeaderKey("apikey")

// hasAPIKey picks the requests a plan limits: those carrying an API key.
func hasAPIKey(req *http.Request) bool {
	v := req.Header[apiKeyHeader]
	return len(v) > 0 && v[0] != ""
}
