package admission

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The middleware limits every handler it wraps with the same scopes: two
// routes share one client's turns, and each route's own handler answers
// what is admitted.
func TestMiddlewareSharesItsScopesAcrossHandlers(t *testing.T) {
	use, h, err := NewMiddleware(WithLimit(Limit{Name: "per-ip", Rate: perMinute(1), Burst: 2}))
	if err != nil {
		t.Fatal(err)
	}
	cards := use(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "cards") }))
	boards := use(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "boards") }))
	answers := []string{}
	for _, route := range []http.Handler{cards, boards, cards} {
		rec := serve(route, "198.51.100.7:1", "/")
		answers = append(answers, rec.Body.String()[:min(len(rec.Body.String()), 6)]+" "+http.StatusText(rec.Code))
	}
	want := []string{"cards OK", "boards OK", `{"type Too Many Requests`}
	for i := range want {
		if answers[i] != want[i] {
			t.Errorf("answers %q, want %q: the two routes share the burst of 2", answers, want)
			break
		}
	}
	if st := h.Stats(); st.Admitted != 2 || st.Refused != 1 {
		t.Errorf("the Handler counted %d admitted, %d refused; want 2 and 1", st.Admitted, st.Refused)
	}
	if _, _, err := NewMiddleware(WithLimit(Limit{Rate: -1})); err == nil {
		t.Error("NewMiddleware took a negative rate")
	}
}

// WithRefusalResponse writes each refusal's status and body, after the
// Handler has set the RateLimit fields and Retry-After.
func TestRefusalResponse(t *testing.T) {
	var got Refusal
	h := newHandler(t, WithLimit(Limit{Name: "per-ip", Rate: perMinute(1), Burst: 1}),
		WithRefusalResponse(func(w http.ResponseWriter, _ *http.Request, r Refusal) {
			got = r
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(r.Status)
			_, _ = io.WriteString(w, "slow down\n")
		}))
	serve(h, "198.51.100.7:1", "/")
	rec := serve(h, "198.51.100.7:1", "/")
	if rec.Code != http.StatusTooManyRequests || rec.Body.String() != "slow down\n" || rec.Header().Get("Content-Type") != "text/plain" {
		t.Errorf("refused with %d %q (%s), want 429 and the custom body", rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"))
	}
	if rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Header().Get("RateLimit"), `"per-ip"`) {
		t.Errorf("the refusal's header %v lacks Retry-After or RateLimit", rec.Header())
	}
	if got.Status != http.StatusTooManyRequests || got.RetryAfter < 50*time.Second || len(got.Scopes) != 1 || got.Scopes[0] != "per-ip" {
		t.Errorf("the func got %+v, want 429, about a minute, per-ip", got)
	}
	if secs, _ := strconv.Atoi(rec.Header().Get("Retry-After")); got.RetryAfter != time.Duration(secs)*time.Second {
		t.Errorf("the func got RetryAfter %v, the header says %s seconds: want them to agree", got.RetryAfter, rec.Header().Get("Retry-After"))
	}
}
