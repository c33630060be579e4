package ratewise

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// youtubePhrases are youtube-remediation-plan.md's anti-bot substrings
// (Phase 2, "Exception detection logic", secondary check).
var youtubePhrases = []string{"confirm you're not a bot", "sign in to confirm", "LOGIN_REQUIRED", "confirm that you're not a bot"}

// youtube-remediation-plan.md, Phase 2 "Detect rate-limit / anti-bot
// signals": a 200 whose body says the client is taken for a bot, in any
// case and with any apostrophe, is Blocked: not retried, handed back as
// the final response with its body whole, counted as a rate-limit hit,
// and an error for CheckResponse. Other 200s are left alone.
func TestBlockPhrasesReadA200AsBlocked(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		blocked bool
	}{
		{name: "typographic apostrophe", body: "<title>YouTube</title>Sign in to confirm you’re not a bot. This helps protect our community.", blocked: true},
		{name: "HTML entity", body: "<div>Please confirm that you&#39;re not a bot</div>", blocked: true},
		{name: "JSON status", body: `{"playabilityStatus":{"status":"LOGIN_REQUIRED","reason":"Sign in"}}`, blocked: true},
		{name: "lower case", body: "login_required", blocked: true},
		{name: "JSON escape", body: `{"reason":"Confirm you\u0027re not a bot"}`, blocked: true},
		{name: "a video about bots", body: `{"title":"How bots sign in to websites"}`},
		{name: "empty", body: ""},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			s := newScript(step{status: 200, header: http.Header{}, body: tt.body})
			tr := New(s.mock(), WithRetry(RetryPolicy{BlockPhrases: youtubePhrases}))
			ctx, stats := WithCallStats(context.Background())
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %v, %v; want the 200 and no error", tt.name, resp, err)
			}
			checked := CheckResponse(resp)
			if got := readAll(t, resp); got != tt.body {
				t.Errorf("%s: the caller read %q, want the whole body %q", tt.name, got, tt.body)
			}
			if s.calls() != 1 {
				t.Errorf("%s: %d attempts, want 1: a Blocked answer is not retried", tt.name, s.calls())
			}
			var rle *RateLimitError
			hits, aborts := stats.RateLimitHits(), tr.Stats().Aborts[GiveUpBlocked]
			if !tt.blocked {
				if checked != nil || hits != 0 || aborts != 0 || resp.Header.Get(ClassHeader) != "" {
					t.Errorf("%s: CheckResponse = %v, %d hits, %d aborts, %s %q; want a plain success",
						tt.name, checked, hits, aborts, ClassHeader, resp.Header.Get(ClassHeader))
				}
				return
			}
			if !errors.As(checked, &rle) || !errors.Is(checked, ErrRateLimited) || rle.Class != Blocked || rle.StatusCode != 200 ||
				rle.RawBody != tt.body {
				t.Errorf("%s: CheckResponse = %#v, want a *RateLimitError, Blocked, 200, with the body", tt.name, checked)
			}
			if checked != nil && !strings.Contains(checked.Error(), "blocked by the server (200 OK)") {
				t.Errorf("%s: error %q, want it to say the server blocked the client", tt.name, checked)
			}
			if hits != 1 || aborts != 1 || resp.Header.Get(ClassHeader) != "blocked" {
				t.Errorf("%s: %d hits, %d aborts blocked, %s %q; want 1, 1, blocked", tt.name, hits, aborts, ClassHeader, resp.Header.Get(ClassHeader))
			}
		})
	}
}

// youtube-remediation-plan.md, Phase 2 "Anti-bot detection opens breaker
// and stops further requests" and the cooldown table (1h, then 6h): three
// anti-bot 200s within ten minutes open the breaker for an hour, without
// a retry among them; the probe after the hour is blocked again, and the
// breaker opens for six. While open, nothing is sent.
func TestBlockedAnswersOpenABreakerThatEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blocked := step{status: 200, header: http.Header{}, body: "Sign in to confirm you’re not a bot"}
		s := newScript(blocked)
		tr := New(s.mock(), WithRetry(RetryPolicy{BlockPhrases: youtubePhrases}), WithBreaker(youtubeBreaker()))
		for i := range 3 {
			if i > 0 {
				time.Sleep(time.Minute)
			}
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil {
				t.Fatalf("detection %d: %v", i+1, err)
			}
			readAll(t, resp)
		}
		if s.calls() != 3 {
			t.Fatalf("%d requests sent for three blocked answers, want 3: none retried", s.calls())
		}
		_, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.ResetIn != time.Hour || s.calls() != 3 {
			t.Fatalf("after three blocked answers: err = %v, %d sent; want the breaker open for 1h, nothing sent", err, s.calls())
		}
		st := tr.KeyStatus(host).Breaker
		if st.Cause.StatusCode != 200 || st.Cause.Class != Blocked || st.Cause.Detail != "Sign in to confirm you’re not a bot" {
			t.Errorf("cause = %+v, want the blocked 200 and its line", st.Cause)
		}

		time.Sleep(time.Hour)
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil)) // the probe, blocked again
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		_, err = tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if !errors.As(err, &open) || open.ResetIn != 6*time.Hour || tr.KeyStatus(host).Breaker.Level != 1 {
			t.Errorf("after the blocked probe: err = %v, want open for 6h at level 1", err)
		}
		if s.calls() != 4 {
			t.Errorf("%d sent, want 4", s.calls())
		}
	})
}

// A ClassifyBody hook reads what a status cannot say: a 200 whose JSON
// reports a rate limit is RateLimited, and retried, as the policy says.
// The hook gets at most 4 KiB of the body; the caller gets all of it.
func TestClassifyBodyRetriesWhenThePolicySays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := `{"ok":true,"items":"` + strings.Repeat("x", 10<<10) + `"}`
		s := newScript(step{status: 200, header: http.Header{}, body: `{"ok":false,"error":"ratelimited"}`},
			step{status: 200, header: http.Header{}, body: big})
		var heads []int
		policy := RetryPolicy{InitialDelay: time.Second, Jitter: JitterNone,
			ClassifyBody: func(resp *http.Response, head []byte) Class {
				heads = append(heads, len(head))
				if bytes.Contains(head, []byte(`"error":"ratelimited"`)) {
					return RateLimited
				}
				return Final
			}}
		r := s.get(t, context.Background(), policy)
		if r.status != 200 || r.body != big || s.calls() != 2 || r.elapsed != time.Second {
			t.Errorf("got %d, %d bytes after %d attempts in %v; want the second 200, whole, after a 1s backoff",
				r.status, len(r.body), s.calls(), r.elapsed)
		}
		if len(heads) != 2 || heads[0] != 34 || heads[1] != peekLimit {
			t.Errorf("the hook saw heads of %v bytes, want 34 and 4096", heads)
		}
	})
}

// countingBody counts the bytes read from it, and its Close.
type countingBody struct {
	r      io.Reader
	read   atomic.Int64
	closed atomic.Bool
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (b *countingBody) Close() error { b.closed.Store(true); return nil }

// The body rules read at most 4 KiB before the response is handed over,
// and the body the caller closes is the server's.
func TestBodyRulesReadABoundedHead(t *testing.T) {
	body := &countingBody{r: io.LimitReader(zeros{}, 1<<20)}
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, Request: req}, nil
	})
	tr := New(base, WithRetry(RetryPolicy{BlockPhrases: youtubePhrases}))
	resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
	if err != nil {
		t.Fatal(err)
	}
	if n := body.read.Load(); n > peekLimit {
		t.Errorf("read %d bytes before handing the response over, want at most %d", n, peekLimit)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if n != 1<<20 || !body.closed.Load() {
		t.Errorf("the caller read %d bytes, closed %v; want 1 MiB and the server's body closed", n, body.closed.Load())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A request whose policy has no body rule for it allocates nothing but
// what its base does: the default transport, one with RateLimitPhrases
// (which a 200 never meets), one with a breaker.
func TestNoBodyRuleAllocatesNothing(t *testing.T) {
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(nil), Request: req}, nil
	})
	req := mustRequest(t, http.MethodGet, nil)
	allocs := func(rt http.RoundTripper) float64 {
		return testing.AllocsPerRun(200, func() {
			resp, _ := rt.RoundTrip(req)
			_ = resp.Body.Close()
		})
	}
	want := allocs(base)
	for name, tr := range map[string]*Transport{
		"default":          New(base),
		"RateLimitPhrases": New(base, WithRetry(RetryPolicy{RateLimitPhrases: []string{"rate limit"}})),
		"breaker":          New(base, WithBreaker(BreakerPolicy{})),
	} {
		if got := allocs(tr); got != want {
			t.Errorf("%s: %v allocations a request, want the base's %v", name, got, want)
		}
	}
}

// A policy with no body rule for a response reads none of its body.
func TestNoBodyRuleReadsNoBody(t *testing.T) {
	body := &countingBody{r: strings.NewReader("Sign in to confirm you're not a bot")}
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, Request: req}, nil
	})
	resp, err := New(base, WithRetry(RetryPolicy{RateLimitPhrases: []string{"bot"}})).RoundTrip(mustRequest(t, http.MethodGet, nil))
	if err != nil {
		t.Fatal(err)
	}
	if n := body.read.Load(); n != 0 || resp.Body != body || CheckResponse(resp) != nil {
		t.Errorf("a 200 with only RateLimitPhrases: read %d bytes, body replaced %v; want none read, the server's body", n, resp.Body != body)
	}
}

// RetryPolicy.CheckResponse applies the body rules to a response that did
// not come through the transport; Validate refuses an empty phrase.
func TestRetryPolicyCheckResponseBlocked(t *testing.T) {
	p := RetryPolicy{BlockPhrases: []string{"not a bot"}}
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("Confirm you're NOT A BOT"))}
	var rle *RateLimitError
	if err := p.CheckResponse(resp); !errors.As(err, &rle) || rle.Class != Blocked {
		t.Errorf("CheckResponse = %v, want a Blocked *RateLimitError", err)
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != "Confirm you're NOT A BOT" {
		t.Errorf("body after the check: %q", got)
	}
	if err := (RetryPolicy{BlockPhrases: []string{" "}}).Validate(); err == nil || !strings.Contains(err.Error(), "BlockPhrases[0] is empty") {
		t.Errorf("Validate of an empty phrase = %v", err)
	}
}
