package headers

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// This file holds one test per API whose rate-limit headers ratewise
// reads. Every header name and value format comes from the page cited
// above the test; where the page shows a whole answer, its values are used
// as they are, and "now" is set so that the wait is exact.

// count is what ReadCount should find: remaining -1 for no count.
type count struct {
	remaining, limit int
	reset            time.Duration
}

var noCount = count{remaining: -1}

// apiCase is one answer of an API and what ratewise reads in it.
type apiCase struct {
	name    string
	status  int
	header  []string // name, value, ... in the documentation's spelling
	limited bool     // what RateLimited, and so ratewise.DefaultClassify, says
	hint    time.Duration
	hasHint bool
	count   count
}

// checkAPI asserts, for each answer, whether it is a refusal for rate, its
// wait hint to the nanosecond and the counts the pacer reads in it.
func checkAPI(t *testing.T, now time.Time, tests []apiCase) {
	t.Helper()
	for _, tt := range tests {
		h := http.Header{}
		for i := 0; i+1 < len(tt.header); i += 2 {
			h.Add(tt.header[i], tt.header[i+1])
		}
		resp := &http.Response{StatusCode: tt.status, Header: h}
		if got := RateLimited(resp); got != tt.limited {
			t.Errorf("%s: RateLimited(%d) = %v, want %v", tt.name, tt.status, got, tt.limited)
		}
		if d, ok := WaitHint(resp, now); d != tt.hint || ok != tt.hasHint {
			t.Errorf("%s: WaitHint = %v, %v; want %v, %v", tt.name, d, ok, tt.hint, tt.hasHint)
		}
		want := Count{Remaining: tt.count.remaining, Limit: tt.count.limit, Reset: tt.count.reset}
		if got := ReadCount(h, now); got != want {
			t.Errorf("%s: ReadCount = %+v, want %+v", tt.name, got, want)
		}
	}
}

// TestGitHubRateLimits: GitHub refuses with 403 (or 429) and
// x-ratelimit-remaining: 0 over its primary limit, with retry-after over a
// secondary one, and asks for a minute when a secondary refusal says
// nothing else.
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
// The 403 and its headers are the example of GitHub's v3 documentation,
// https://docs.github.com/en/rest/overview/resources-in-the-rest-api#rate-limiting
func TestGitHubRateLimits(t *testing.T) {
	now, _ := http.ParseTime("Tue, 20 Aug 2013 14:50:41 GMT") // the answer's Date
	primary := []string{"Date", "Tue, 20 Aug 2013 14:50:41 GMT", "X-RateLimit-Limit", "60",
		"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1377013266"}
	checkAPI(t, now, []apiCase{
		{name: "primary limit, 403", status: 403, header: primary,
			limited: true, hint: 50*time.Minute + 25*time.Second, hasHint: true,
			count: count{0, 60, 50*time.Minute + 25*time.Second}},
		{name: "primary limit, 429", status: 429, header: primary,
			limited: true, hint: 50*time.Minute + 25*time.Second, hasHint: true,
			count: count{0, 60, 50*time.Minute + 25*time.Second}},
		{name: "secondary limit with retry-after", status: 403, header: []string{"retry-after", "60",
			"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-ratelimit-used", "1",
			"x-ratelimit-reset", "1377013266", "x-ratelimit-resource", "core", "x-github-request-id", "CE2C:2D7E:1A2B3C:4D5E6F:5F5E0A1B"},
			limited: true, hint: time.Minute, hasHint: true,
			count: count{4999, 5000, 50*time.Minute + 25*time.Second}},
		{name: "secondary limit, nothing but the body", status: 403, header: []string{
			"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999",
			"x-ratelimit-reset", "1377013266", "x-github-request-id", "CE2C:2D7E:1A2B3C:4D5E6F:5F5E0A1B"},
			hint: time.Minute, hasHint: true, // the body tells; a minute once it does
			count: count{4999, 5000, 50*time.Minute + 25*time.Second}},
		{name: "secondary limit as a 429", status: 429, header: []string{
			"x-ratelimit-limit", "5000", "x-ratelimit-remaining", "4999", "x-github-request-id", "CE2C:2D7E:1A2B3C:4D5E6F:5F5E0A1B"},
			limited: true, hint: time.Minute, hasHint: true, count: count{4999, 5000, 0}},
		{name: "a permission refused", status: 403, header: []string{"x-ratelimit-limit", "5000",
			"x-ratelimit-remaining", "4998", "x-ratelimit-reset", "1377013266"},
			count: count{4998, 5000, 50*time.Minute + 25*time.Second}},
		{name: "a success", status: 200, header: []string{"x-ratelimit-limit", "5000",
			"x-ratelimit-remaining", "4999", "x-ratelimit-reset", "1377013266", "x-github-request-id", "CE2C:2D7E:1A2B3C:4D5E6F:5F5E0A1B"},
			count: count{4999, 5000, 50*time.Minute + 25*time.Second}},
	})
}

// TestOpenAIRateLimits: OpenAI counts requests and tokens apart, its
// resets Go durations until the quota is whole again. The values are the
// page's sample; a refusal spends one of the two.
// https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers
func TestOpenAIRateLimits(t *testing.T) {
	sample := func(remainingRequests, remainingTokens string) []string {
		return []string{"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", remainingRequests, "x-ratelimit-remaining-tokens", remainingTokens,
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"}
	}
	checkAPI(t, refNow, []apiCase{
		{name: "the sample", status: 200, header: sample("59", "149984"),
			count: count{59, 60, time.Second}},
		{name: "tokens spent", status: 429, header: sample("59", "0"),
			limited: true, hint: 6 * time.Minute, hasHint: true, count: count{59, 60, time.Second}},
		{name: "requests spent", status: 429, header: sample("0", "149984"),
			limited: true, hint: time.Second, hasHint: true, count: count{0, 60, time.Second}},
		{name: "both spent: the longer", status: 429, header: sample("0", "0"),
			limited: true, hint: 6 * time.Minute, hasHint: true, count: count{0, 60, time.Second}},
		{name: "milliseconds", status: 429, header: []string{"x-ratelimit-remaining-requests", "0",
			"x-ratelimit-reset-requests", "12ms", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "9ms"},
			limited: true, hint: 12 * time.Millisecond, hasHint: true, count: count{0, 0, 12 * time.Millisecond}},
		{name: "Retry-After wins", status: 429, header: append(sample("0", "0"), "retry-after", "20"),
			limited: true, hint: 20 * time.Second, hasHint: true, count: count{0, 60, time.Second}},
	})
}

// TestAnthropicRateLimits: Anthropic sends retry-after on a 429 and counts
// requests, tokens, input and output tokens apart, each reset an RFC 3339
// date-time.
// https://docs.anthropic.com/en/api/rate-limits#response-headers
func TestAnthropicRateLimits(t *testing.T) {
	counts := []string{"anthropic-ratelimit-requests-limit", "50",
		"anthropic-ratelimit-requests-remaining", "42", "anthropic-ratelimit-requests-reset", "2026-03-10T12:00:01Z",
		"anthropic-ratelimit-input-tokens-limit", "40000",
		"anthropic-ratelimit-input-tokens-remaining", "0", "anthropic-ratelimit-input-tokens-reset", "2026-03-10T12:00:30Z",
		"anthropic-ratelimit-output-tokens-limit", "8000",
		"anthropic-ratelimit-output-tokens-remaining", "8000", "anthropic-ratelimit-output-tokens-reset", "2026-03-10T12:00:00Z",
		"anthropic-ratelimit-tokens-limit", "48000",
		"anthropic-ratelimit-tokens-remaining", "0", "anthropic-ratelimit-tokens-reset", "2026-03-10T12:00:30Z"}
	checkAPI(t, refNow, []apiCase{
		{name: "429 with retry-after", status: 429, header: append([]string{"retry-after", "30"}, counts...),
			limited: true, hint: 30 * time.Second, hasHint: true, count: count{42, 50, time.Second}},
		{name: "429, the input tokens spent", status: 429, header: counts,
			limited: true, hint: 30 * time.Second, hasHint: true, count: count{42, 50, time.Second}},
		{name: "requests spent", status: 429, header: []string{"anthropic-ratelimit-requests-limit", "50",
			"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-03-10T12:00:01.5Z"},
			limited: true, hint: 1500 * time.Millisecond, hasHint: true, count: count{0, 50, 1500 * time.Millisecond}},
		{name: "a success", status: 200, header: []string{"anthropic-ratelimit-requests-limit", "50",
			"anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", "2026-03-10T12:00:01Z"},
			count: count{49, 50, time.Second}},
	})
}

// TestDiscordRateLimits: Discord's 429s carry Retry-After and its
// X-RateLimit-* headers, X-RateLimit-Reset a Unix time with decimals and
// X-RateLimit-Reset-After seconds with decimals. The answers are the
// page's examples.
// https://discord.com/developers/docs/topics/rate-limits
func TestDiscordRateLimits(t *testing.T) {
	now := time.Unix(1470173023, 123e6).Add(-64570 * time.Millisecond) // X-RateLimit-Reset less X-RateLimit-Reset-After
	user := []string{"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "1470173023.123", "X-RateLimit-Reset-After", "64.57",
		"X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Scope", "user"}
	const resetAfter = 64570 * time.Millisecond
	checkAPI(t, now, []apiCase{
		{name: "user limit", status: 429, header: append([]string{"Retry-After", "65"}, user...),
			limited: true, hint: 65 * time.Second, hasHint: true, count: count{0, 10, resetAfter}},
		{name: "user limit, no Retry-After", status: 429, header: user,
			limited: true, hint: resetAfter, hasHint: true, count: count{0, 10, resetAfter}},
		{name: "user limit, the Unix time alone", status: 429, header: user[:6],
			limited: true, hint: resetAfter, hasHint: true, count: count{0, 10, resetAfter}},
		{name: "shared resource limit", status: 429, header: []string{"Retry-After", "1337",
			"X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "9", "X-RateLimit-Reset", "1470173023.123",
			"X-RateLimit-Reset-After", "64.57", "X-RateLimit-Bucket", "abcd1234", "X-RateLimit-Scope", "shared"},
			limited: true, hint: 1337 * time.Second, hasHint: true, count: count{9, 10, resetAfter}},
		{name: "global limit", status: 429, header: []string{"Retry-After", "65",
			"X-RateLimit-Global", "true", "X-RateLimit-Scope", "global"},
			limited: true, hint: 65 * time.Second, hasHint: true, count: noCount},
		{name: "the header example", status: 200, header: []string{"X-RateLimit-Limit", "5",
			"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "1470173023", "X-RateLimit-Reset-After", "1",
			"X-RateLimit-Bucket", "abcd1234"},
			hint: time.Second, hasHint: true, count: count{0, 5, time.Second}},
	})
}

// TestShopifyRateLimits: Shopify's REST Admin API counts calls in a leaky
// bucket, X-Shopify-Shop-Api-Call-Limit: used/size, and a 429 says how
// long to wait in decimal seconds.
// https://shopify.dev/docs/api/admin-rest/usage/rate-limits
func TestShopifyRateLimits(t *testing.T) {
	checkAPI(t, refNow, []apiCase{
		{name: "32 of 40", status: 200, header: []string{"X-Shopify-Shop-Api-Call-Limit", "32/40"},
			count: count{8, 40, 0}},
		{name: "full", status: 429, header: []string{"X-Shopify-Shop-Api-Call-Limit", "40/40", "Retry-After", "2.0"},
			limited: true, hint: 2 * time.Second, hasHint: true, count: count{0, 40, 0}},
	})
}

// TestSlackRateLimits: Slack answers 429 with Retry-After in seconds and
// counts nothing in headers.
// https://docs.slack.dev/apis/web-api/rate-limits
func TestSlackRateLimits(t *testing.T) {
	checkAPI(t, refNow, []apiCase{
		{name: "429", status: 429, header: []string{"Retry-After", "30"},
			limited: true, hint: 30 * time.Second, hasHint: true, count: noCount},
	})
}

// TestStripeRateLimits: Stripe answers 429 and asks for backoff; it names
// no wait and counts nothing in headers, so the policy's backoff applies.
// https://docs.stripe.com/rate-limits
func TestStripeRateLimits(t *testing.T) {
	checkAPI(t, refNow, []apiCase{
		{name: "429", status: 429, header: []string{"Request-Id", "req_123", "Stripe-Version", "2024-06-20"},
			limited: true, count: noCount},
	})
}

// TestJiraRateLimits: Jira Cloud answers 429 with Retry-After and
// X-RateLimit-Reset, an ISO 8601 date-time to the minute
// ("yyyy-MM-ddTHH:mmZ"), and its hourly points quota in Beta-RateLimit
// and Beta-RateLimit-Policy, of the IETF draft's syntax.
// https://developer.atlassian.com/cloud/jira/platform/rate-limiting/
// The Beta-RateLimit values are those quoted in
// https://community.developer.atlassian.com/t/2026-point-based-rate-limits/97828
func TestJiraRateLimits(t *testing.T) {
	burst := []string{"X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0",
		"X-RateLimit-Reset", "2026-03-10T12:01Z", "RateLimit-Reason", "jira-burst-based"}
	checkAPI(t, refNow, []apiCase{
		{name: "burst limit", status: 429, header: append([]string{"Retry-After", "60"}, burst...),
			limited: true, hint: time.Minute, hasHint: true, count: count{0, 100, time.Minute}},
		{name: "burst limit, no Retry-After", status: 429, header: burst,
			limited: true, hint: time.Minute, hasHint: true, count: count{0, 100, time.Minute}},
		{name: "points quota spent", status: 429, header: []string{"Beta-RateLimit", `"tenant-app-quota";r=0;t=2788`,
			"X-Beta-RateLimit-Reason", "jira-quota-tenant-based", "X-RateLimit-Limit", "400", "X-RateLimit-Remaining", "399"},
			limited: true, hint: 2788 * time.Second, hasHint: true, count: count{0, 0, 2788 * time.Second}},
		{name: "near the quota: the burst count binds", status: 200, header: []string{
			"Beta-RateLimit-Policy", `"tenant-app-quota";q=100100;w=3600`, "Beta-RateLimit", `"tenant-app-quota";r=17842;t=2107`,
			"X-Beta-RateLimit-NearLimit", "true", "X-RateLimit-Limit", "350", "X-RateLimit-Remaining", "349"},
			count: count{349, 350, 0}},
		{name: "the quota binds", status: 200, header: []string{
			"Beta-RateLimit-Policy", `"tenant-app-quota";q=100100;w=3600`, "Beta-RateLimit", `"tenant-app-quota";r=17;t=2107`,
			"X-RateLimit-Limit", "350", "X-RateLimit-Remaining", "349"},
			count: count{17, 100100, 2107 * time.Second}},
	})
}

// TestCloudflareRateLimits: Cloudflare's API sends the IETF draft's
// Ratelimit and Ratelimit-Policy on every answer, and retry-after, rounded
// up, on a 429. The page's example names its limit "default" and its
// policy "burst".
// https://developers.cloudflare.com/fundamentals/api/reference/limits/
func TestCloudflareRateLimits(t *testing.T) {
	checkAPI(t, refNow, []apiCase{
		{name: "the example", status: 200, header: []string{"Ratelimit", `"default";r=50;t=30`,
			"Ratelimit-Policy", `"burst";q=100;w=60`},
			count: count{50, 100, 30 * time.Second}},
		{name: "429", status: 429, header: []string{"Ratelimit", `"default";r=0;t=30`,
			"Ratelimit-Policy", `"burst";q=100;w=60`, "retry-after", "30"},
			limited: true, hint: 30 * time.Second, hasHint: true, count: count{0, 100, 30 * time.Second}},
		{name: "429 without retry-after", status: 429, header: []string{"Ratelimit", `"default";r=0;t=30`},
			limited: true, hint: 30 * time.Second, hasHint: true, count: count{0, 0, 30 * time.Second}},
	})
}

// TestIETFDraftRateLimitHeaders: the forms of
// draft-ietf-httpapi-ratelimit-headers, with the drafts' own examples: -10's
// structured RateLimit and RateLimit-Policy, -07's dictionary, and -01's
// RateLimit-Limit, -Remaining and -Reset.
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/07/
// https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/01/
func TestIETFDraftRateLimitHeaders(t *testing.T) {
	date, _ := http.ParseTime("Mon, 05 Aug 2019 09:27:00 GMT")
	checkAPI(t, date, []apiCase{
		// -10
		{name: "-10 remaining and reset", status: 200, header: []string{"RateLimit", `"default";r=50;t=30`},
			count: count{50, 0, 30 * time.Second}},
		{name: "-10 with its policy", status: 200, header: []string{"RateLimit-Policy", `"somepolicy";q=10000;w=1000`,
			"RateLimit", `"somepolicy";r=10000;t=10`},
			count: count{10000, 10000, 10 * time.Second}},
		{name: "-10 redirect with quota spent", status: 301, header: []string{"Location", "/foo/123",
			"RateLimit", `"problemPolicy";r=0;t=10`},
			hint: 10 * time.Second, hasHint: true, count: count{0, 0, 10 * time.Second}},
		{name: "-10 Retry-After takes precedence", status: 429, header: []string{"Retry-After", "20",
			"RateLimit", `"problemPolicy";r=0;t=10`},
			limited: true, hint: 20 * time.Second, hasHint: true, count: count{0, 0, 10 * time.Second}},
		// -07
		{name: "-07 dictionary", status: 200, header: []string{"RateLimit-Policy", "100;w=10",
			"RateLimit", "limit=100, remaining=50, reset=5"},
			count: count{50, 100, 5 * time.Second}},
		{name: "-07 redirect with quota spent", status: 301, header: []string{"Location", "/foo/123",
			"RateLimit", "limit=10, remaining=0, reset=10"},
			hint: 10 * time.Second, hasHint: true, count: count{0, 0, 10 * time.Second}},
		// -01
		{name: "-01 Retry-After as a date", status: 429, header: []string{"Date", "Mon, 05 Aug 2019 09:27:00 GMT",
			"Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT", "RateLimit-Reset", "5", "RateLimit-Limit", "100", "Ratelimit-Remaining", "0"},
			limited: true, hint: 5 * time.Second, hasHint: true, count: count{0, 100, 5 * time.Second}},
		{name: "-01 pushing back", status: 429, header: []string{"RateLimit-Limit", "0, 15;w=20",
			"Ratelimit-Remaining", "0", "Ratelimit-Reset", "20"},
			limited: true, hint: 20 * time.Second, hasHint: true, count: count{0, 0, 20 * time.Second}},
		{name: "-01 pushing back with Retry-After", status: 429, header: []string{"Retry-After", "20",
			"RateLimit-Limit", "15, 100;w=60", "Ratelimit-Remaining", "15", "Ratelimit-Reset", "40"},
			limited: true, hint: 20 * time.Second, hasHint: true, count: count{15, 15, 40 * time.Second}},
		{name: "-01 several windows", status: 200, header: []string{"RateLimit-Limit", "5000, 1000;w=3600, 5000;w=86400",
			"RateLimit-Remaining", "100", "RateLimit-Reset", "36000"},
			count: count{100, 5000, 10 * time.Hour}},
	})
}

// TestAzureRetryAfterMs: Azure services (Cosmos DB, Azure OpenAI) give the
// wait in milliseconds, retry-after-ms or x-ms-retry-after-ms, besides or
// instead of Retry-After, and Azure's own clients read them first. The
// pages give the unit, not an example value.
// https://learn.microsoft.com/en-us/rest/api/cosmos-db/common-cosmosdb-rest-response-headers
// https://learn.microsoft.com/en-us/azure/ai-services/openai/quotas-limits
func TestAzureRetryAfterMs(t *testing.T) {
	checkAPI(t, refNow, []apiCase{
		{name: "Cosmos DB", status: 429, header: []string{"x-ms-retry-after-ms", "1234"},
			limited: true, hint: 1234 * time.Millisecond, hasHint: true, count: noCount},
		{name: "Azure OpenAI", status: 429, header: []string{"retry-after-ms", "1500", "retry-after", "2",
			"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0"},
			limited: true, hint: 1500 * time.Millisecond, hasHint: true, count: count{0, 0, 0}},
		{name: "both: retry-after-ms first", status: 429, header: []string{"x-ms-retry-after-ms", "900", "retry-after-ms", "1500"},
			limited: true, hint: 1500 * time.Millisecond, hasHint: true, count: noCount},
		{name: "a bad value falls through", status: 429, header: []string{"retry-after-ms", "-1", "retry-after", "2"},
			limited: true, hint: 2 * time.Second, hasHint: true, count: noCount},
	})
}

// TestParseReset covers each form of a reset, and what is not one.
func TestParseReset(t *testing.T) {
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		{give: "30", want: 30 * time.Second, wantOK: true},
		{give: "64.57", want: 64570 * time.Millisecond, wantOK: true},
		{give: strconv.FormatInt(refNow.Add(time.Minute).Unix(), 10), want: time.Minute, wantOK: true},
		{give: "6m0s", want: 6 * time.Minute, wantOK: true},
		{give: "1h2m3.5s", want: time.Hour + 2*time.Minute + 3500*time.Millisecond, wantOK: true},
		{give: "12ms", want: 12 * time.Millisecond, wantOK: true},
		{give: "7µs", want: 7 * time.Microsecond, wantOK: true},
		{give: "7us", want: 7 * time.Microsecond, wantOK: true},
		{give: "1.5h", want: 90 * time.Minute, wantOK: true},
		{give: "0s", want: 0, wantOK: true},
		{give: "2562047h47m16.854775807s", want: math64Max, wantOK: true},
		{give: "2026-03-10T12:01:00Z", want: time.Minute, wantOK: true},
		{give: "2026-03-10T12:00:00.25Z", want: 250 * time.Millisecond, wantOK: true},
		{give: "2026-03-10T13:01:00+01:00", want: time.Minute, wantOK: true},
		{give: "2026-03-10T12:01Z", want: time.Minute, wantOK: true},
		{give: "2026-03-10T11:00Z", want: 0, wantOK: true}, // past
		// sethvargo/go-limiter's httplimit formats its reset with time.RFC1123
		{give: "Tue, 10 Mar 2026 12:01:00 UTC", want: time.Minute, wantOK: true},
		{give: "Tue, 10 Mar 2026 12:01:00 GMT", want: time.Minute, wantOK: true},
		// not resets
		{give: "", wantOK: false},
		{give: "-1s", wantOK: false},
		{give: "+1s", wantOK: false},
		{give: "1e3", wantOK: false},
		{give: "1 s", wantOK: false},
		{give: "s", wantOK: false},
		{give: "1.2.3s", wantOK: false},
		{give: "5d", wantOK: false},
		{give: "2562047h47m16.854775808s", wantOK: false},
		{give: "9999999999999h", wantOK: false},
		{give: "2026-03-10T12:01", wantOK: false},
		{give: "2026-13-10T12:01:00Z", wantOK: false},
		{give: "9999-12-31T23:59:59Z", wantOK: false}, // past what a Duration holds
		{give: "2026-03-10 12:01:00Z", wantOK: false},
		{give: "Tue, 10 Mar 2026 12:01:00 CET", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := parseReset(tt.give, refNow)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseReset(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

const math64Max = time.Duration(1<<63 - 1)

// TestParseMillisAndCallLimit covers the millisecond hints and Shopify's
// bucket count, hostile values included.
func TestParseMillisAndCallLimit(t *testing.T) {
	millis := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		{"1500", 1500 * time.Millisecond, true},
		{" 20.5 ", 20500 * time.Microsecond, true},
		{"0", 0, true},
		{"9223372036854", 9223372036854 * time.Millisecond, true},
		{"9223372036855", 0, false},
		{"-1", 0, false},
		{"1e3", 0, false},
		{"", 0, false},
	}
	for _, tt := range millis {
		if got, ok := parseMillis(tt.give); got != tt.want || ok != tt.wantOK {
			t.Errorf("parseMillis(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
	calls := []struct {
		give       string
		used, size int
		wantOK     bool
	}{
		{"32/40", 32, 40, true},
		{" 1 / 40 ", 1, 40, true},
		{"41/40", 40, 40, true},
		{"99999999999/99999999999", 1<<31 - 1, 1<<31 - 1, true},
		{"32", 0, 0, false},
		{"-1/40", 0, 0, false},
		{"1.5/40", 0, 0, false},
		{"32/", 0, 0, false},
		{"/40", 0, 0, false},
	}
	for _, tt := range calls {
		used, size, ok := parseCallLimit(tt.give)
		if used != tt.used || size != tt.size || ok != tt.wantOK {
			t.Errorf("parseCallLimit(%q) = %d, %d, %v; want %d, %d, %v", tt.give, used, size, ok, tt.used, tt.size, tt.wantOK)
		}
	}
}

// TestReadingAllocatesNothing holds ReadCount and WaitHint to no
// allocation on a typical answer of each family: the pacer reads every
// answer of a key it holds.
func TestReadingAllocatesNothing(t *testing.T) {
	for _, bb := range benchResponses {
		resp := &http.Response{StatusCode: bb.status, Header: benchHeader(bb.header)}
		if n := testing.AllocsPerRun(100, func() { ReadCount(resp.Header, benchNow) }); n != 0 {
			t.Errorf("ReadCount(%s) allocates %v times, want 0", bb.name, n)
		}
		if n := testing.AllocsPerRun(100, func() { WaitHint(resp, benchNow) }); n != 0 {
			t.Errorf("WaitHint(%s) allocates %v times, want 0", bb.name, n)
		}
	}
}
