package headers

import (
	"net/http"
	"testing"
)

// UnreadableHint names the first wait hint WaitHint reads and cannot, in
// WaitHint's order, with the value read; it stops at a hint that reads,
// and a reset whose quota is not spent is not read.
func TestUnreadableHint(t *testing.T) {
	tests := []struct {
		name       string
		header     []string // name, value pairs
		wantHeader string   // "" means none reported
		wantValue  string
	}{
		{"word", []string{"Retry-After", "soon"}, "Retry-After", "soon"},
		{"negative", []string{"Retry-After", "-5"}, "Retry-After", "-5"},
		{"list", []string{"Retry-After", "3, 4"}, "Retry-After", "3, 4"},
		{"empty", []string{"Retry-After", ""}, "Retry-After", ""},
		{"readable", []string{"Retry-After", "5"}, "", ""},
		{"date", []string{"Retry-After", "Tue, 10 Mar 2026 12:00:30 GMT"}, "", ""},
		{"none", nil, "", ""},
		{"second value reads", []string{"Retry-After", "5", "Retry-After", "soon"}, "", ""},
		{"first value does not", []string{"Retry-After", "soon", "Retry-After", "5"}, "Retry-After", "soon"},
		{"millis", []string{"Retry-After-Ms", "1e3"}, "Retry-After-Ms", "1e3"},
		{"azure millis", []string{"X-Ms-Retry-After-Ms", "-20"}, "X-Ms-Retry-After-Ms", "-20"},
		{"millis read before", []string{"Retry-After-Ms", "1500", "Retry-After", "soon"}, "", ""},
		{"passed over for a reset", []string{"Retry-After", "soon", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "30"}, "Retry-After", "soon"},
		{"draft reset", []string{"RateLimit-Remaining", "0", "RateLimit-Reset", "later"}, "Ratelimit-Reset", "later"},
		{"draft reset, quota left", []string{"RateLimit-Remaining", "4", "RateLimit-Reset", "later"}, "", ""},
		{"structured", []string{"RateLimit", `"default";r=0;t=soon`}, "Ratelimit", `"default";r=0;t=soon`},
		{"structured, quota left", []string{"RateLimit", `"default";r=3;t=soon`}, "", ""},
		{"structured, readable", []string{"RateLimit", `"default";r=0;t=5`}, "", ""},
		{"dictionary", []string{"RateLimit", "limit=10, remaining=0, reset=x"}, "Ratelimit", "limit=10, remaining=0, reset=x"},
		{"atlassian", []string{"Beta-RateLimit", `"hour";r=0;t=-1`}, "Beta-Ratelimit", `"hour";r=0;t=-1`},
		{"structured read before", []string{"RateLimit", `"default";r=0;t=5`, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon"}, "", ""},
		{"discord", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "1s"}, "X-Ratelimit-Reset-After", "1s"},
		{"x reset", []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "soon"}, "X-Ratelimit-Reset", "soon"},
		{"x reset, no count", []string{"X-RateLimit-Reset", "3, 4"}, "X-Ratelimit-Reset", "3, 4"},
		{"x reset, quota left", []string{"X-RateLimit-Remaining", "12", "X-RateLimit-Reset", "soon"}, "", ""},
		{"openai", []string{"X-RateLimit-Remaining-Tokens", "0", "X-RateLimit-Reset-Tokens", "6 minutes"}, "X-Ratelimit-Reset-Tokens", "6 minutes"},
		{"anthropic", []string{"Anthropic-RateLimit-Requests-Remaining", "0", "Anthropic-RateLimit-Requests-Reset", "2026-13-10T12:01:00Z"},
			"Anthropic-Ratelimit-Requests-Reset", "2026-13-10T12:01:00Z"},
		{"github minute", []string{"X-GitHub-Request-Id", "abc"}, "", ""},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: 429, Header: http.Header{}}
		for i := 0; i+1 < len(tt.header); i += 2 {
			resp.Header.Add(tt.header[i], tt.header[i+1])
		}
		name, value, ok := UnreadableHint(resp, refNow)
		if ok != (tt.wantHeader != "") || name != tt.wantHeader || value != tt.wantValue {
			t.Errorf("%s: UnreadableHint = %q, %q, %v; want %q, %q", tt.name, name, value, ok, tt.wantHeader, tt.wantValue)
		}
	}
	if _, _, ok := UnreadableHint(nil, refNow); ok {
		t.Error("UnreadableHint(nil) reported a hint")
	}
}
