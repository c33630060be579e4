package headers

import (
	"net/http"
	"testing"
	"time"
)

// benchNow is the "now" of the header benchmarks: the resets below are a
// minute or so after it.
var benchNow = time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)

// benchResponses are typical refusals of each family of rate-limit
// headers, with a few of the other headers a real answer carries (they
// make the header map as large as a real one).
var benchResponses = []struct {
	name   string
	status int
	header []string // key, value pairs, in the API's own spelling
}{
	{"none", 200, nil},
	{"GitHub", 403, []string{"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0",
		"x-ratelimit-used", "5000", "x-ratelimit-reset", "1773144060", "x-ratelimit-resource", "core"}},
	{"OpenAI", 429, []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
		"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "149984",
		"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"}},
	{"Anthropic", 429, []string{"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-03-10T12:01:00Z",
		"anthropic-ratelimit-tokens-limit", "50000", "anthropic-ratelimit-tokens-remaining", "49000",
		"anthropic-ratelimit-tokens-reset", "2026-03-10T12:00:02Z"}},
	{"Discord", 429, []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "1773144064.57", "X-RateLimit-Reset-After", "64.57", "X-RateLimit-Bucket", "abcd1234"}},
	{"Shopify", 429, []string{"X-Shopify-Shop-Api-Call-Limit", "40/40"}},
	{"Slack", 429, []string{"Retry-After", "30"}},
	{"Jira", 429, []string{"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "2026-03-10T12:01Z", "RateLimit-Reason", "jira-burst-based"}},
	{"Cloudflare", 429, []string{"Ratelimit", `"default";r=0;t=30`, "Ratelimit-Policy", `"default";q=1200;w=300`}},
	{"IETF draft RateLimit-*", 429, []string{"RateLimit-Limit", "100", "RateLimit-Remaining", "0", "RateLimit-Reset", "30"}},
	{"IETF draft dictionary", 429, []string{"RateLimit", "limit=100, remaining=0, reset=30"}},
	{"Azure", 429, []string{"retry-after-ms", "1500", "x-ms-retry-after-ms", "1500"}},
}

func benchHeader(kv []string) http.Header {
	h := http.Header{
		"Content-Type": {"application/json"},
		"Date":         {"Tue, 10 Mar 2026 12:00:00 GMT"},
		"Server":       {"api"},
		"X-Request-Id": {"req_0123456789"},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// BenchmarkReadCount is the pacer's reading of a response of each family;
// it runs on every answer to a key the pacer holds.
func BenchmarkReadCount(b *testing.B) {
	for _, bb := range benchResponses {
		b.Run(bb.name, func(b *testing.B) {
			resp := &http.Response{StatusCode: bb.status, Header: benchHeader(bb.header)}
			b.ReportAllocs()
			for b.Loop() {
				ReadCount(resp.Header, benchNow)
			}
		})
	}
}

// BenchmarkWaitHint is the reading of a refusal's wait hint, for each
// family.
func BenchmarkWaitHint(b *testing.B) {
	for _, bb := range benchResponses {
		b.Run(bb.name, func(b *testing.B) {
			resp := &http.Response{StatusCode: bb.status, Header: benchHeader(bb.header)}
			b.ReportAllocs()
			for b.Loop() {
				WaitHint(resp, benchNow)
			}
		})
	}
}
