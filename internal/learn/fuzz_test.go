package learn

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise/internal/headers"
)

// FuzzReadAnswer feeds rate-limit headers to ReadAnswer, then the answer
// to a Pacer: the counts it reads are within range, and the
// pace and waits it derives from them are finite and not negative.
func FuzzReadAnswer(f *testing.F) {
	type seed struct {
		xRemaining, xLimit, xReset string
		remaining, limit, reset    string
		rateLimit, policy          string
		status                     int
		refused                    bool
	}
	for _, s := range []seed{
		{status: 200},
		{xRemaining: "4999", xLimit: "5000", xReset: "1773144060", status: 200},
		{xRemaining: "0", xLimit: "5000", xReset: "3600", status: 429, refused: true},
		{remaining: "9", limit: "10", reset: "1", status: 200},
		{remaining: "0", limit: "10", reset: "0.5", status: 429, refused: true},
		{rateLimit: `"burst";r=0;t=5, "day";r=9;t=60`, policy: `"burst";q=10;w=1, "day";q=1000;w=86400`, status: 429, refused: true},
		{rateLimit: "limit=100, remaining=50, reset=30", status: 200},
		{xRemaining: "99999999999", xLimit: "99999999999", xReset: "99999999999", status: 200},
		{xRemaining: "-1", remaining: "1.5", limit: "-10", reset: "-5", status: 200},
		{xRemaining: "42, 42;w=60", xLimit: "100;w=60", xReset: "9223372036854775807", status: 200},
		{rateLimit: `"a";r=0;t=0.000000001`, policy: `"a";q=99999999999`, status: 200},
		{rateLimit: `"a";r=;t=`, policy: `;q=`, status: 503},
		{remaining: "\x00", limit: "\t7", reset: "1e3", rateLimit: "\x7f;;=,", status: -1},
	} {
		f.Add(s.xRemaining, s.xLimit, s.xReset, s.remaining, s.limit, s.reset, s.rateLimit, s.policy, s.status, s.refused)
	}
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, xRemaining, xLimit, xReset, remaining, limit, reset, rateLimit, policy string, status int, refused bool) {
		h := http.Header{}
		for _, kv := range [][2]string{
			{"X-RateLimit-Remaining", xRemaining}, {"X-RateLimit-Limit", xLimit}, {"X-RateLimit-Reset", xReset},
			{"RateLimit-Remaining", remaining}, {"RateLimit-Limit", limit}, {"RateLimit-Reset", reset},
			{"RateLimit", rateLimit}, {"RateLimit-Policy", policy},
		} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		resp := &http.Response{StatusCode: status, Header: h}
		an := ReadAnswer(resp, refused, now)

		// A refusal is no success, whatever its status (a 200 that a body
		// phrase reads as refused).
		if an.OK != (status >= 200 && status <= 299 && !refused) || an.Refused != refused {
			t.Fatalf("status %d, refused %v: ok %v, refused %v", status, refused, an.OK, an.Refused)
		}
		if an.Remaining < -1 || an.Remaining > math.MaxInt32 || an.Limit < 0 || an.Limit > math.MaxInt32 || an.Reset < 0 {
			t.Fatalf("ReadAnswer(%v) = %+v, out of range", h, an)
		}
		if an.Remaining < 0 && (an.Limit != 0 || an.Reset != 0) {
			t.Fatalf("ReadAnswer(%v) = %+v: a limit or reset without a count", h, an)
		}
		// The least count of every family is the one read.
		checkLeast(t, an, map[string]string{"X-RateLimit-Remaining": xRemaining, "RateLimit-Remaining": remaining})

		// The pacer takes the answer, then the same again a little later,
		// which measures a refill; whatever it made of them, the pace and
		// the waits are finite and not negative.
		for _, ceiling := range []float64{math.Inf(1), 10} {
			a := New(0, ceiling, time.Time{})
			at := now
			for i := range 3 {
				if i > 0 {
					at = at.Add(300 * time.Millisecond)
				}
				if _, _, _, sent := a.Take(at); sent {
					a.Outcome(a.sent, an, at)
				}
				checkPace(t, a, an, at)
				checkPace(t, a, an, at.Add(an.Reset/2))
				checkPace(t, a, an, at.Add(time.Hour))
			}
		}
	})
}

// checkLeast checks that an's count is at most each plain count given, by
// the name of its header.
func checkLeast(t *testing.T, an Answer, counts map[string]string) {
	t.Helper()
	for name, v := range counts {
		if n, ok := smallCount(v); ok && (an.Remaining < 0 || an.Remaining > n) {
			t.Fatalf("%s %q, but ReadAnswer read a count of %d", name, v, an.Remaining)
		}
	}
}

// FuzzReadAnswerFamilies feeds the counts of OpenAI, Anthropic, Discord,
// Shopify and Atlassian to ReadAnswer, then the answer to a Pacer: the
// least count is read, every count is in range, and the pace derived from
// it is finite and not negative.
func FuzzReadAnswerFamilies(f *testing.F) {
	type seed struct {
		openAIRemaining, openAIReset       string
		anthropicRemaining, anthropicReset string
		resetAfter, shopify                string
		beta, betaPolicy                   string
		status                             int
		refused                            bool
	}
	for _, s := range []seed{
		{openAIRemaining: "59", openAIReset: "1s", status: 200},
		{openAIRemaining: "0", openAIReset: "6m0s", status: 429, refused: true},
		{anthropicRemaining: "42", anthropicReset: "2026-03-10T12:00:01Z", status: 200},
		{anthropicRemaining: "0", anthropicReset: "2026-03-10T12:01Z", status: 429, refused: true},
		{resetAfter: "64.57", shopify: "32/40", status: 200},
		{shopify: "40/40", status: 429, refused: true},
		{beta: `"tenant-app-quota";r=17842;t=2107`, betaPolicy: `"tenant-app-quota";q=100100;w=3600`, status: 200},
		{openAIRemaining: "1", anthropicRemaining: "2", shopify: "3/7", beta: `"q";r=0;t=9`, status: 200},
		{openAIReset: "2562047h47m16.854775808s", anthropicReset: "9999-12-31T23:59:59Z", resetAfter: "1e3", shopify: "-1/40", status: 200},
		{openAIRemaining: "99999999999", openAIReset: "-1s", anthropicReset: "2026-13-40T99:99Z", shopify: "99999999999/1", status: 200},
	} {
		f.Add(s.openAIRemaining, s.openAIReset, s.anthropicRemaining, s.anthropicReset, s.resetAfter, s.shopify, s.beta, s.betaPolicy, s.status, s.refused)
	}
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, openAIRemaining, openAIReset, anthropicRemaining, anthropicReset, resetAfter, shopify, beta, betaPolicy string, status int, refused bool) {
		h := http.Header{}
		for _, kv := range [][2]string{
			{"x-ratelimit-remaining-requests", openAIRemaining}, {"x-ratelimit-reset-requests", openAIReset},
			{"anthropic-ratelimit-requests-remaining", anthropicRemaining}, {"anthropic-ratelimit-requests-reset", anthropicReset},
			{"X-RateLimit-Reset-After", resetAfter}, {"X-RateLimit-Remaining", "5"},
			{"X-Shopify-Shop-Api-Call-Limit", shopify},
			{"Beta-RateLimit", beta}, {"Beta-RateLimit-Policy", betaPolicy},
		} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		an := ReadAnswer(&http.Response{StatusCode: status, Header: h}, refused, now)
		if an.Remaining < -1 || an.Remaining > math.MaxInt32 || an.Limit < 0 || an.Limit > math.MaxInt32 || an.Reset < 0 {
			t.Fatalf("ReadAnswer(%v) = %+v, out of range", h, an)
		}
		if an.Remaining < 0 || an.Remaining > 5 {
			t.Fatalf("ReadAnswer(%v) = %+v; X-RateLimit-Remaining: 5 caps the count", h, an)
		}
		checkLeast(t, an, map[string]string{"OpenAI": openAIRemaining, "Anthropic": anthropicRemaining})
		// What Shopify's count leaves, when it is readable, caps the count.
		alone := headers.ReadCount(http.Header{"X-Shopify-Shop-Api-Call-Limit": {shopify}}, now)
		if alone.Remaining >= 0 && an.Remaining > alone.Remaining {
			t.Fatalf("Shopify %q leaves %d, but ReadAnswer read %d", shopify, alone.Remaining, an.Remaining)
		}
		for _, ceiling := range []float64{math.Inf(1), 10} {
			a := New(0, ceiling, time.Time{})
			at := now
			for i := range 3 {
				if i > 0 {
					at = at.Add(300 * time.Millisecond)
				}
				if _, _, _, sent := a.Take(at); sent {
					a.Outcome(a.sent, an, at)
				}
				checkPace(t, a, an, at)
				checkPace(t, a, an, at.Add(an.Reset/2))
			}
		}
	})
}

// smallCount reads a plain count of at most nine digits.
func smallCount(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// checkPace checks what a pacer derives at now from the answers it had.
func checkPace(t *testing.T, a *Pacer, an Answer, now time.Time) {
	t.Helper()
	expected, _ := a.Join(now)
	a.Leave()
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rate(now)
	d, _ := a.wait(now)
	if math.IsNaN(r) || r < 0 || d < 0 || expected < 0 {
		t.Fatalf("after %+v: rate %v, wait %v, expected %v; want none negative or NaN", an, r, d, expected)
	}
	if c := a.count; c != nil {
		if refill := c.refill(); math.IsNaN(refill) || refill < 0 || refill > 1e6 {
			t.Fatalf("after %+v: refill %v a second, want within [0, 1e6]", an, refill)
		}
		if c.remaining < 0 || c.limit < 0 || c.consumed < 0 {
			t.Fatalf("after %+v: count %+v, want none negative", an, c)
		}
	}
}
