package ratewise

import (
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultRetryPolicy(t *testing.T) {
	p := DefaultRetryPolicy()
	want := RetryPolicy{
		MaxAttempts: 5, InitialDelay: time.Second, MaxDelay: 30 * time.Second, Multiplier: 2,
		Jitter: JitterFull, JitterFraction: 0.2, TotalWaitCap: 2 * time.Minute, NetworkRetries: 2,
		MaxBufferedBody: 1 << 20, RetryBudget: 0.2, RetryBudgetFloor: 10,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("DefaultRetryPolicy() = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("DefaultRetryPolicy().Validate() = %v", err)
	}
	if err := (RetryPolicy{}).Validate(); err != nil {
		t.Errorf("zero RetryPolicy.Validate() = %v", err)
	}
	got := RetryPolicy{MaxAttempts: 9, Jitter: JitterNone}.WithDefaults()
	if got.MaxAttempts != 9 || got.Jitter != JitterNone || got.InitialDelay != DefaultInitialDelay || got.TotalWaitCap != DefaultTotalWaitCap {
		t.Errorf("WithDefaults() = %+v, want the set fields kept and the zero ones defaulted", got)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		give RetryPolicy
		want []string // substrings of the error; none means valid
	}{
		{name: "valid", give: RetryPolicy{MaxAttempts: 1, InitialDelay: time.Millisecond, MaxDelay: time.Millisecond}},
		{name: "no retry-after network", give: RetryPolicy{NetworkRetries: NoNetworkRetries}},
		{name: "MaxAttempts", give: RetryPolicy{MaxAttempts: -2}, want: []string{"MaxAttempts (-2) must be at least 1"}},
		{name: "Multiplier below 1", give: RetryPolicy{Multiplier: 0.9}, want: []string{"Multiplier (0.9)"}},
		{name: "Multiplier NaN", give: RetryPolicy{Multiplier: math.NaN()}, want: []string{"Multiplier (NaN)"}},
		{name: "Multiplier Inf", give: RetryPolicy{Multiplier: math.Inf(1)}, want: []string{"Multiplier (+Inf)"}},
		{name: "negative InitialDelay", give: RetryPolicy{InitialDelay: -time.Second}, want: []string{"InitialDelay (-1s)"}},
		{name: "negative MaxDelay", give: RetryPolicy{MaxDelay: -time.Second}, want: []string{"MaxDelay (-1s)"}},
		{name: "MaxDelay below InitialDelay", give: RetryPolicy{InitialDelay: 5 * time.Second, MaxDelay: 2 * time.Second},
			want: []string{"RetryPolicy.MaxDelay (2s) is below InitialDelay (5s)"}},
		{name: "default MaxDelay below InitialDelay", give: RetryPolicy{InitialDelay: time.Minute},
			want: []string{"MaxDelay (30s, the default) is below InitialDelay (1m0s)"}},
		{name: "TotalWaitCap below default InitialDelay", give: RetryPolicy{TotalWaitCap: 500 * time.Millisecond},
			want: []string{"TotalWaitCap (500ms) is below InitialDelay (1s, the default)"}},
		{name: "TotalWaitCap below InitialDelay", give: RetryPolicy{InitialDelay: 5 * time.Second, TotalWaitCap: time.Second},
			want: []string{"TotalWaitCap (1s) is below InitialDelay (5s)"}},
		{name: "negative TotalWaitCap", give: RetryPolicy{TotalWaitCap: -1}, want: []string{"TotalWaitCap (-1ns)"}},
		{name: "unknown Jitter", give: RetryPolicy{Jitter: 9}, want: []string{"Jitter (9)"}},
		{name: "JitterFraction", give: RetryPolicy{JitterFraction: 1.5}, want: []string{"JitterFraction (1.5)"}},
		{name: "NetworkRetries", give: RetryPolicy{NetworkRetries: -3}, want: []string{"NetworkRetries (-3)"}},
		{name: "MaxBufferedBody", give: RetryPolicy{MaxBufferedBody: -1}, want: []string{"MaxBufferedBody (-1)"}},
		{name: "no retry budget", give: RetryPolicy{RetryBudget: NoRetryBudget}},
		{name: "RetryBudget negative", give: RetryPolicy{RetryBudget: -0.5}, want: []string{"RetryBudget (-0.5)"}},
		{name: "RetryBudget NaN", give: RetryPolicy{RetryBudget: math.NaN()}, want: []string{"RetryBudget (NaN)"}},
		{name: "RetryBudgetFloor negative", give: RetryPolicy{RetryBudgetFloor: -1}, want: []string{"RetryBudgetFloor (-1)"}},
		{name: "RetryBudgetFloor Inf", give: RetryPolicy{RetryBudgetFloor: math.Inf(1)}, want: []string{"RetryBudgetFloor (+Inf)"}},
		{name: "empty phrase", give: RetryPolicy{RateLimitPhrases: []string{"ok", " "}}, want: []string{"RateLimitPhrases[1]"}},
		{name: "every bad field at once", give: RetryPolicy{MaxAttempts: -1, Multiplier: 0.5, InitialDelay: -time.Second},
			want: []string{"MaxAttempts (-1)", "Multiplier (0.5)", "InitialDelay (-1s)"}},
	}
	for _, tt := range tests {
		err := tt.give.Validate()
		if len(tt.want) == 0 {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate() = nil, want an error naming %q", tt.name, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q, want it to contain %q", tt.name, err, w)
			}
		}
	}
}

func TestBackoffGrowsAndCaps(t *testing.T) {
	p := RetryPolicy{Jitter: JitterNone, InitialDelay: time.Second, MaxDelay: 30 * time.Second}.WithDefaults()
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for retry, w := range want {
		if got := p.Backoff(retry); got != w*time.Second {
			t.Errorf("Backoff(%d) = %v, want %v", retry, got, w*time.Second)
		}
	}
	for _, retry := range []int{-1, 1000, math.MaxInt} {
		got := p.Backoff(retry)
		if got < 0 || got > p.MaxDelay {
			t.Errorf("Backoff(%d) = %v, want within [0, %v]", retry, got, p.MaxDelay)
		}
	}
	// A huge MaxDelay must not overflow into a negative wait.
	huge := RetryPolicy{Jitter: JitterNone, MaxDelay: math.MaxInt64, Multiplier: 1e12}
	for retry := range 10 {
		if got := huge.Backoff(retry); got < 0 {
			t.Errorf("MaxDelay MaxInt64: Backoff(%d) = %v, want non-negative", retry, got)
		}
	}
	if got := huge.Backoff(9); got != math.MaxInt64 {
		t.Errorf("MaxDelay MaxInt64: Backoff(9) = %v, want MaxDelay", got)
	}
	if got := (RetryPolicy{Jitter: JitterNone, Multiplier: 3}).Backoff(2); got != 9*time.Second {
		t.Errorf("Multiplier 3: Backoff(2) = %v, want 9s", got)
	}
}

func TestFullJitterStaysInRange(t *testing.T) {
	p := RetryPolicy{InitialDelay: time.Second, MaxDelay: 20 * time.Second}
	for retry, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second} {
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for range 10000 {
			d := p.Backoff(retry)
			if d < 0 || d > base {
				t.Fatalf("Backoff(%d) = %v, want within [0, %v]", retry, d, base)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		// 10,000 uniform draws cover the range: a constant would not.
		if lo > base/20 || hi < base*19/20 {
			t.Errorf("retry %d: draws spanned [%v, %v], want close to [0, %v]", retry, lo, hi, base)
		}
	}
}

func TestProportionalJitterStaysInRange(t *testing.T) {
	p := RetryPolicy{Jitter: JitterProportional, JitterFraction: 0.2, InitialDelay: time.Second, MaxDelay: time.Minute}
	for retry, base := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		for range 10000 {
			d := p.Backoff(retry)
			if d < base*8/10 || d > base*12/10 {
				t.Fatalf("Backoff(%d) = %v, want within [%v, %v]", retry, d, base*8/10, base*12/10)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo > base*81/100 || hi < base*119/100 {
			t.Errorf("retry %d: draws spanned [%v, %v], want close to [0.8, 1.2]·%v", retry, lo, hi, base)
		}
	}
	// At the cap, draws stay spread below MaxDelay instead of piling on it.
	capped := RetryPolicy{Jitter: JitterProportional, InitialDelay: time.Second, MaxDelay: 10 * time.Second}.WithDefaults()
	if lo, hi := capped.backoff(10, 0), capped.backoff(10, 0.999999); lo != 8*time.Second || hi > 10*time.Second || hi < 9999*time.Millisecond {
		t.Errorf("capped proportional draws span [%v, %v], want [8s, 10s]", lo, hi)
	}
}

func TestDefaultClassify(t *testing.T) {
	tests := []struct {
		status int
		header http.Header
		want   Class
	}{
		{status: 200, want: Final},
		{status: 404, want: Final},
		{status: 429, want: RateLimited},
		{status: 429, header: http.Header{"Retry-After": {"5"}}, want: RateLimited},
		{status: 503, want: Final},
		{status: 503, header: http.Header{"Retry-After": {"5"}}, want: RateLimited},
		{status: 500, header: http.Header{"Retry-After": {"5"}}, want: Final},
		// A 403 is a refusal for rate only when its headers say so.
		{status: 403, want: Final},
		{status: 403, header: http.Header{"X-Ratelimit-Remaining": {"0"}}, want: RateLimited},
		{status: 403, header: http.Header{"X-Ratelimit-Remaining": {" 0 "}}, want: RateLimited},
		{status: 403, header: http.Header{"X-Ratelimit-Remaining": {"4999"}}, want: Final},
		{status: 403, header: http.Header{"X-Ratelimit-Remaining": {"none"}}, want: Final},
		{status: 403, header: http.Header{"X-Ratelimit-Remaining": {""}}, want: Final},
		{status: 403, header: http.Header{"Retry-After": {"60"}}, want: RateLimited},
		{status: 403, header: http.Header{"Ratelimit-Remaining": {"0"}}, want: Final},
		{status: 401, header: http.Header{"X-Ratelimit-Remaining": {"0"}}, want: Final},
		{status: 200, header: http.Header{"X-Ratelimit-Remaining": {"0"}}, want: Final},
	}
	for _, tt := range tests {
		if got := DefaultClassify(&http.Response{StatusCode: tt.status, Header: tt.header}); got != tt.want {
			t.Errorf("DefaultClassify(%d, %v) = %v, want %v", tt.status, tt.header, got, tt.want)
		}
	}
}

// BenchmarkDefaultClassify is the classification every response pays for,
// on an answer with the headers most carry and, for GitHub's refusal, its
// rate-limit headers.
func BenchmarkDefaultClassify(b *testing.B) {
	header := func(kv ...string) http.Header {
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
	for _, bb := range []struct {
		name string
		resp *http.Response
	}{
		{"200", &http.Response{StatusCode: 200, Header: header()}},
		{"403 GitHub", &http.Response{StatusCode: 403, Header: header("x-ratelimit-limit", "5000", "x-ratelimit-remaining", "0",
			"x-ratelimit-used", "5000", "x-ratelimit-reset", "1773144060", "x-ratelimit-resource", "core")}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				DefaultClassify(bb.resp)
			}
		})
	}
}

func TestPhraseMatchLeavesBodyWhole(t *testing.T) {
	body := "Rate Limit exceeded. " + strings.Repeat("z", 10000)
	resp := &http.Response{StatusCode: 403, Body: io.NopCloser(strings.NewReader(body))}
	p := RetryPolicy{RateLimitPhrases: []string{"RATE LIMIT"}}
	if got := p.classify(resp, nil); got != RateLimited {
		t.Fatalf("classify = %v, want RateLimited", got)
	}
	if err := p.CheckResponse(resp); err == nil {
		t.Error("CheckResponse = nil for a phrase-matched response")
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body {
		t.Errorf("body after classify: %d bytes, %v; want all %d", len(got), err, len(body))
	}
}

func TestPolicyCheckResponseUsesItsClassification(t *testing.T) {
	p := RetryPolicy{Classify: func(r *http.Response) Class {
		if r.StatusCode == http.StatusForbidden {
			return RateLimited
		}
		return Final
	}}
	if err := p.CheckResponse(&http.Response{StatusCode: 403, Body: http.NoBody}); err == nil {
		t.Error("CheckResponse(403) = nil, want a RateLimitError from the hook")
	}
	if err := p.CheckResponse(&http.Response{StatusCode: 429, Body: http.NoBody}); err != nil {
		t.Errorf("CheckResponse(429) = %v, want nil: the hook says final", err)
	}
	if err := p.CheckResponse(nil); err != nil {
		t.Errorf("CheckResponse(nil) = %v, want nil", err)
	}
}

func TestPeekKeepsReadError(t *testing.T) {
	resp := &http.Response{StatusCode: 500, Body: io.NopCloser(io.MultiReader(strings.NewReader("abc"), errReader{}))}
	if got := string(peekBody(resp, 10)); got != "abc" {
		t.Fatalf("peek = %q, want abc", got)
	}
	got, err := io.ReadAll(resp.Body)
	if string(got) != "abc" || err != errBroken {
		t.Errorf("read after peek = %q, %v; want abc, %v", got, err, errBroken)
	}
}

var errBroken = io.ErrClosedPipe

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errBroken }

func TestStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{JitterFull.String(), "full"}, {JitterProportional.String(), "proportional"}, {JitterNone.String(), "none"},
		{Jitter(7).String(), "Jitter(7)"},
		{Final.String(), "final"}, {RateLimited.String(), "rate-limited"}, {Retryable.String(), "retryable"},
		{Class(9).String(), "Class(9)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}
