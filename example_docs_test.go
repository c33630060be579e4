package ratewise_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/ratewisetest"
)

// This file is the code README.md and docs/ show (TestDocSnippetsAreCompiled
// holds each snippet to it), run against fakes of the APIs.

// fakeDefaultTransport makes http.DefaultTransport a fake of the APIs the
// docs call, until restore, so that an example shows the base a program
// uses and sends nothing on the network. Examples run one at a time,
// after the tests.
func fakeDefaultTransport() (restore func()) {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(200, `["a","b"]`))
	mock.RegisterResponder(http.MethodGet, "https://www.youtube.com/watch",
		httpmock.NewStringResponder(200, "<html>Sign in to confirm you’re not a bot</html>"))
	saved := http.DefaultTransport
	http.DefaultTransport = mock
	return func() { http.DefaultTransport = saved }
}

// The README's quick start: a client told a limit of 30 requests a minute,
// with retries within a minute of waiting and a breaker.
func Example_quickStart() {
	defer fakeDefaultTransport()()

	tr, err := ratewise.NewTransport(http.DefaultTransport,
		ratewise.WithLimit(ratewise.Limit{Rate: rate.Every(2 * time.Second), Burst: 30}), // told: 30 a minute, 30 at once
		ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 6, TotalWaitCap: time.Minute}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{}), // opens after 5 failures in a row; the 429s of one burst are one
	)
	if err != nil { // a bad option, named: ratewise.New would fail every call with it
		log.Fatal(err)
	}
	client := &http.Client{Transport: tr}

	ctx, stats := ratewise.WithCallStats(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "https://api.example.com/items", nil)
	resp, err := client.Do(req) // an error only when no response came back
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if err := ratewise.CheckResponse(resp); err != nil { // a final 429, as a *ratewise.RateLimitError
		log.Fatal(err)
	}
	fmt.Println(resp.StatusCode, "after", stats.Attempts(), "attempt, waited", stats.Waited())
	// Output: 200 after 1 attempt, waited 0s
}

// Told, learned, or neither: the scopes of each transport, the
// LearnedScope last, where New adds it.
func ExampleLimit_told() {
	base := httpmock.NewMockTransport()

	// Learns each host's limit from its answers.
	learns := ratewise.New(base)
	// Told 30 a minute; learned under only if the server refuses under it.
	told := ratewise.New(base, ratewise.WithLimit(ratewise.Limit{Rate: rate.Every(2 * time.Second), Burst: 30}))
	// Told a window of 30 a minute: 30 at once, the next as the first leave the minute.
	window := ratewise.New(base, ratewise.WithLimit(ratewise.Limit{Burst: 30, Window: time.Minute}))
	// Learned per API key, never above 100 a second.
	perKey := ratewise.New(base, ratewise.WithLimit(ratewise.Limit{Adaptive: true, Rate: 100, Key: ratewise.ByHeader("Authorization")}))
	// The retries and the breaker alone.
	alone := ratewise.New(base, ratewise.WithoutLearning())

	for _, tr := range []*ratewise.Transport{learns, told, window, perKey, alone} {
		var scopes []string
		for _, l := range tr.Limits() {
			scopes = append(scopes, fmt.Sprintf("%s (adaptive: %v)", l.Name, l.Adaptive))
		}
		fmt.Println(len(scopes), "scopes", scopes)
	}
	// Output:
	// 1 scopes [learned (adaptive: true)]
	// 2 scopes [limit 1 (adaptive: false) learned (adaptive: true)]
	// 2 scopes [limit 1 (adaptive: false) learned (adaptive: true)]
	// 1 scopes [limit 1 (adaptive: true)]
	// 0 scopes []
}

// The Stats of a transport after three calls: one refused once, then
// answered; one that met a 503 asking to retry at once; one the server
// refused for longer than the call may wait. The waits last a little
// longer than asked: here they are rounded to a tenth of a second.
func ExampleTransport_Stats() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items",
		httpmock.NewStringResponder(429, "").HeaderSet(http.Header{"Retry-After": {"0"}}).
			Then(httpmock.NewStringResponder(200, "[]")))
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/comments",
		httpmock.NewStringResponder(503, "").HeaderSet(http.Header{"Retry-After": {"0"}}).
			Then(httpmock.NewStringResponder(200, "[]")))
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/subtasks",
		httpmock.NewStringResponder(429, "").HeaderSet(http.Header{"Retry-After": {"3600"}}))
	tr := ratewise.New(mock, ratewise.WithoutLearning(),
		ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: 150 * time.Millisecond, Jitter: ratewise.JitterNone}))

	for _, path := range []string{"/items", "/comments", "/subtasks"} {
		resp, err := (&http.Client{Transport: tr}).Get("https://api.example.com" + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	st := tr.Stats()
	st.TotalWait, st.AverageWait = st.TotalWait.Round(100*time.Millisecond), st.AverageWait.Round(100*time.Millisecond)
	for kind, w := range st.WaitsByKind {
		w.Total = w.Total.Round(100 * time.Millisecond)
		st.WaitsByKind[kind] = w
	}
	b, _ := json.Marshal(st)
	fmt.Println(string(b))
	// Output:
	// {"calls":3,"attempts":5,"retries":2,"rate_limit_hits":3,"succeeded":2,"aborts":{"attempts":0,"blocked":0,"body":0,"breaker_open":0,"canceled":0,"invalid":0,"limit":0,"network":0,"retry_budget":0,"wait_budget":1},"waits":2,"retries_by_reason":{"429":1,"503":1},"rate_limit_hits_by_key":{"api.example.com":3},"waits_by_kind":{"backoff":{"count":2,"buckets":[0,2,2,2,2,2,2,2,2],"total_seconds":0.3}},"total_wait_seconds":0.3,"average_wait_seconds":0.2}
}

// An operator's bad value keeps the default in force, and says so.
func ExampleLimitFromEnvLenient() {
	os.Setenv("YOUTUBE_MIN_DELAY", "-500")
	defer os.Unsetenv("YOUTUBE_MIN_DELAY")
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))

	warn := func(f ratewise.EnvFallback) {
		log.Warn("invalid config, using the default", "var", f.Var, "value", f.Value, "used", f.Used, "reason", f.Reason)
	}
	limit := ratewise.LimitFromEnvLenient("YOUTUBE", ratewise.Limit{MinSpacing: 2 * time.Second}, warn)
	policy := ratewise.PolicyFromEnvLenient("YOUTUBE", ratewise.RetryPolicy{MaxAttempts: 4}, warn)

	fmt.Println("spacing", limit.MinSpacing, "attempts", policy.MaxAttempts)
	// Output:
	// level=WARN msg="invalid config, using the default" var=YOUTUBE_MIN_DELAY value=-500 used=2s reason="want a duration such as \"5s\" or \"1m30s\", or whole milliseconds, not negative"
	// spacing 2s attempts 4
}

// A running transport reloads its retry policy and its limit from the
// environment on SIGHUP, without dropping a call in flight.
func ExampleTransport_SetLimit() {
	os.Setenv("KANBANIZE_RETRY_MAX_ATTEMPTS", "3")
	os.Setenv("KANBANIZE_RATE", "60/m")
	os.Setenv("KANBANIZE_BURST", "10")
	defer func() {
		for _, v := range []string{"KANBANIZE_RETRY_MAX_ATTEMPTS", "KANBANIZE_RATE", "KANBANIZE_BURST"} {
			os.Unsetenv(v)
		}
	}()
	tr := ratewise.New(httpmock.NewMockTransport(),
		ratewise.WithLimit(ratewise.Limit{Name: "kanbanize", Rate: rate.Every(2 * time.Second), Burst: 30}))
	hup := make(chan os.Signal, 1)

	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			if p, err := ratewise.PolicyFromEnv("KANBANIZE"); err == nil {
				_ = tr.SetRetryPolicy(p)
			}
			if l, err := ratewise.LimitFromEnv("KANBANIZE"); err == nil && l.Rate != 0 {
				_ = tr.SetLimit(l) // the scope named "kanbanize"
			}
		}
	}()

	hup <- syscall.SIGHUP // what kill -HUP does
	// Two more, which reload the same: the last is taken only once the
	// goroutine is done with the first (hup holds one).
	hup <- syscall.SIGHUP
	hup <- syscall.SIGHUP
	signal.Stop(hup)
	close(hup)
	l := tr.Limits()[0]
	fmt.Printf("%s: %v a second, %d at once; %d attempts\n", l.Name, float64(l.Rate), l.Burst, tr.RetryPolicy().MaxAttempts)
	// Output: kanbanize: 1 a second, 10 at once; 3 attempts
}

// The breaker of a scraper that a site may take for a bot: the first
// detection is counted, not retried, and an error for CheckResponse; three
// in 10 minutes open the breaker for an hour, and longer each time after.
func ExampleTransport_Blocking() {
	defer fakeDefaultTransport()()
	store := ratewise.NewMemoryStore()

	tr := ratewise.New(http.DefaultTransport,
		ratewise.WithRetry(ratewise.RetryPolicy{
			BlockPhrases: []string{"confirm you're not a bot", "sign in to confirm", "LOGIN_REQUIRED"},
		}),
		ratewise.WithLimit(ratewise.Limit{Name: "youtube", MinSpacing: 3 * time.Second, SpacingJitter: 0.3}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{
			WindowFailures: 3, Window: 10 * time.Minute, // three detections in 10 minutes open it
			Cooldown:     time.Hour, // for an hour, then
			Escalation:   []time.Duration{6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour},
			RetripWindow: 24 * time.Hour, // 6 h for a second detection within 24 h of closing
			Decay:        48 * time.Hour, // a quiet 48 h steps it one level down
			FailFast:     true,           // a call to an open breaker fails at once
			Store:        store,          // Redis (see fleets.md): one breaker for every replica, across restarts
		}))

	resp, err := (&http.Client{Transport: tr}).Get("https://www.youtube.com/watch?v=x")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	var refused *ratewise.RateLimitError
	if errors.As(ratewise.CheckResponse(resp), &refused) {
		fmt.Println(resp.StatusCode, refused.Class)
	}

	if blocked, wait := tr.Blocking("www.youtube.com"); blocked {
		log.Printf("YouTube blocks us for %v more: skipping the batch", wait)
	}
	st := tr.KeyStatus("www.youtube.com").Breaker
	// st.OpenedAt, st.Level, st.Cause: {StatusCode: 200, Class: blocked, Detail: "Sign in to confirm you’re not a bot"}
	fmt.Println(st.State, "after", st.Failures, "detection")
	// Output:
	// 200 blocked
	// closed after 1 detection
}

// TestRetriesOn429 is docs/testing.md's: httpmock as the base under the
// transport, in a synctest bubble where waits take no real time.
func TestRetriesOn429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mock := httpmock.NewMockTransport()
		mock.RegisterResponder("GET", "https://api.example.com/items",
			httpmock.NewStringResponder(429, "").HeaderSet(http.Header{"Retry-After": {"30"}}).
				Then(httpmock.NewStringResponder(200, `["a"]`)))
		client := &http.Client{Transport: ratewise.New(mock)}

		start := time.Now()
		resp, err := client.Get("https://api.example.com/items")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("Get = %v, %v", resp, err)
		}
		resp.Body.Close()
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("waited %v, want exactly 30s", waited)
		}
	})
}

// TestPacedUnderABucket is docs/testing.md's: ratewisetest's Bucket, a
// rate-limited API with no network, under a transport that is told
// nothing, in a synctest bubble, where the batch's seconds take no real
// time: it takes the least time the limit allows, within 2%, and no
// request is refused.
func TestPacedUnderABucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := ratewisetest.Config{Rate: 10, Burst: 5, PublishHeaders: true} // 10 a second, 5 at once; X-RateLimit-* on every answer
		api := ratewisetest.NewBucket(cfg)
		client := &http.Client{Transport: ratewise.New(api)}

		start := time.Now()
		for range 25 {
			resp, err := client.Get("http://api.example.test/items")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		if took, ideal := time.Since(start), cfg.Ideal(25); took > ideal+ideal/50 {
			t.Errorf("25 calls took %v, want within 2%% of the ideal %v", took, ideal)
		}
		if st := api.Stats(); st.Limited != 0 {
			t.Errorf("the API refused %d requests, want none", st.Limited)
		}
	})
}
