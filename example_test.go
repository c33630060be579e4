package ratewise_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/jarcoal/httpmock"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// A fake API that refuses the first request with 429 and then answers. The
// mock is the base under the ratewise Transport, never in place of it.
func fakeAPI() *httpmock.MockTransport {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items",
		httpmock.NewStringResponder(429, "slow down").HeaderSet(http.Header{"Retry-After": {"0"}}).
			Then(httpmock.NewStringResponder(200, `["a","b"]`)))
	return mock
}

func ExampleNew() {
	client := &http.Client{Transport: ratewise.New(fakeAPI(), ratewise.WithRetry(ratewise.RetryPolicy{
		MaxAttempts:  3,
		InitialDelay: time.Millisecond,
	}))}

	ctx, stats := ratewise.WithCallStats(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/items", nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", stats.Attempts(), "attempts,", stats.RateLimitHits(), "rate-limited")
	// Output: 200 after 2 attempts, 1 rate-limited
}

func ExampleCheckResponse() {
	client := &http.Client{Transport: ratewise.New(fakeAPI(), ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}))}
	resp, err := client.Get("https://api.example.com/items")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()

	err = ratewise.CheckResponse(resp)
	var rle *ratewise.RateLimitError
	if errors.As(err, &rle) {
		fmt.Println(err)
		fmt.Printf("body %q, retry after %v\n", rle.RawBody, rle.RetryAfter)
	}
	// Output:
	// ratewise: rate limited (429 Too Many Requests); server asked to wait 0s
	// body "slow down", retry after 0s
}

func ExampleParseRetryAfter() {
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "1.5", "Tue, 10 Mar 2026 12:00:30 GMT", "Mon, 09 Mar 2026 12:00:00 GMT", "-1", "99999999999"} {
		d, ok := ratewise.ParseRetryAfter(v, now)
		fmt.Printf("%q: %v %v\n", v, d, ok)
	}
	// Output:
	// "120": 2m0s true
	// "1.5": 1.5s true
	// "Tue, 10 Mar 2026 12:00:30 GMT": 30s true
	// "Mon, 09 Mar 2026 12:00:00 GMT": 0s true
	// "-1": 0s false
	// "99999999999": 0s false
}

func ExampleWaitHint() {
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	resp := &http.Response{StatusCode: 429, Header: http.Header{
		"Ratelimit":         {`"minute";r=0;t=20, "hour";r=100;t=1800`},
		"X-Ratelimit-Reset": {fmt.Sprint(now.Add(time.Minute).Unix())},
	}}
	d, ok := ratewise.WaitHint(resp, now)
	fmt.Println(d, ok)
	// Output: 20s true
}

// Each API says "slow down" its own way; WaitHint and DefaultClassify
// read them all.
func ExampleWaitHint_apis() {
	now := time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)
	for _, a := range []struct {
		api    string
		status int
		header []string
	}{
		{"GitHub", 403, []string{"x-ratelimit-remaining", "0", "x-ratelimit-reset", fmt.Sprint(now.Add(50 * time.Minute).Unix())}},
		{"OpenAI", 429, []string{"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s"}},
		{"Anthropic", 429, []string{"anthropic-ratelimit-requests-remaining", "0", "anthropic-ratelimit-requests-reset", "2026-03-10T12:00:30Z"}},
		{"Discord", 429, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "64.57"}},
		{"Azure", 429, []string{"x-ms-retry-after-ms", "1500"}},
		{"Jira", 429, []string{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-03-10T12:01Z"}},
	} {
		h := http.Header{}
		for i := 0; i < len(a.header); i += 2 {
			h.Set(a.header[i], a.header[i+1])
		}
		resp := &http.Response{StatusCode: a.status, Header: h}
		d, _ := ratewise.WaitHint(resp, now)
		fmt.Printf("%-9s %d %v, wait %v\n", a.api, a.status, ratewise.DefaultClassify(resp), d)
	}
	// Output:
	// GitHub    403 rate-limited, wait 50m0s
	// OpenAI    429 rate-limited, wait 6m0s
	// Anthropic 429 rate-limited, wait 30s
	// Discord   429 rate-limited, wait 1m4.57s
	// Azure     429 rate-limited, wait 1.5s
	// Jira      429 rate-limited, wait 1m0s
}

func ExampleRetryPolicy_Backoff() {
	p := ratewise.RetryPolicy{InitialDelay: time.Second, MaxDelay: 10 * time.Second, Jitter: ratewise.JitterNone}
	for retry := range 6 {
		fmt.Print(p.Backoff(retry), " ")
	}
	fmt.Println()
	// Output: 1s 2s 4s 8s 10s 10s
}

func ExampleRetryPolicy_Validate() {
	err := ratewise.RetryPolicy{MaxAttempts: -1, InitialDelay: 5 * time.Second, MaxDelay: 2 * time.Second}.Validate()
	fmt.Println(err)
	// Output:
	// ratewise: RetryPolicy.MaxAttempts (-1) must be at least 1
	// ratewise: RetryPolicy.MaxDelay (2s) is below InitialDelay (5s)
}

func ExampleWithBudget() {
	// Two calls made with ctx wait at most 90s between them, in total.
	ctx := ratewise.WithBudget(context.Background(), 90*time.Second)
	left, _ := ratewise.BudgetLeft(ctx)
	fmt.Println(left)
	// Output: 1m30s
}

func ExampleRetryablehttpPolicy() {
	p := ratewise.RetryPolicy{InitialDelay: time.Millisecond}
	client := retryablehttp.NewClient()
	client.HTTPClient.Transport = fakeAPI()
	client.Logger = nil
	client.CheckRetry, client.Backoff = ratewise.RetryablehttpPolicy(p)
	client.RetryMax = p.WithDefaults().MaxAttempts - 1
	client.ErrorHandler = retryablehttp.PassthroughErrorHandler

	resp, err := client.Get("https://api.example.com/items")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// A plan of 30 requests a minute, shared by every request to the host,
// that refuses at once rather than queue: a batch job can tell the user
// when to come back.
func ExampleWithLimit() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(200, "[]"))
	client := &http.Client{Transport: ratewise.New(mock, ratewise.WithLimit(ratewise.Limit{
		Name:     "plan",
		Rate:     rate.Every(2 * time.Second), // 30 a minute
		Burst:    2,
		FailFast: true,
	}))}

	for range 3 {
		resp, err := client.Get("https://api.example.com/items")
		var le *ratewise.ClientLimitError
		switch {
		case errors.As(err, &le):
			fmt.Printf("refused by %s (%s), try again in about %v\n", le.Scope, le.Reason, le.RetryIn.Round(time.Second))
		case err != nil:
			fmt.Println("error:", err)
		default:
			resp.Body.Close()
			fmt.Println(resp.StatusCode)
		}
	}
	// Output:
	// 200
	// 200
	// refused by plan (fail-fast), try again in about 2s
}

// An adaptive limit learns the pace from the server: here from its count
// of the quota left, so that no request is sent that the count says would
// be refused. Rate is a ceiling the learned pace never passes.
func ExampleLimit_adaptive() {
	remaining := 10 // an API with a quota of 10, refilled within a second
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", func(*http.Request) (*http.Response, error) {
		remaining--
		resp := httpmock.NewStringResponse(http.StatusOK, "[]")
		resp.Header.Set("X-RateLimit-Limit", "10")
		resp.Header.Set("X-RateLimit-Remaining", fmt.Sprint(remaining))
		resp.Header.Set("X-RateLimit-Reset", "1")
		return resp, nil
	})
	client := &http.Client{Transport: ratewise.New(mock, ratewise.WithLimit(ratewise.Limit{Adaptive: true, Rate: 100}))}

	for range 3 {
		resp, err := client.Get("https://api.example.com/items")
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), "left")
	}
	// Output:
	// 200 9 left
	// 200 8 left
	// 200 7 left
}

// A breaker opens after two failures in a row; while it is open nothing is
// sent, and a call that cannot wait for the reset gets a
// *CircuitOpenError, which tool servers can return as JSON.
func ExampleWithBreaker() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(503, ""))
	tr := ratewise.New(mock,
		ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Minute}))
	client := &http.Client{Transport: tr}

	for range 2 {
		resp, _ := client.Get("https://api.example.com/items")
		resp.Body.Close()
	}
	blocked, _ := tr.Blocking("api.example.com")
	fmt.Println("blocked:", blocked)

	ctx := ratewise.WithBudget(context.Background(), 0) // this call may not wait
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/items", nil)
	_, err := tr.RoundTrip(req)
	var open *ratewise.CircuitOpenError
	if errors.As(err, &open) {
		fmt.Println(open.State, "after", open.Failures, "failures; calls sent:", mock.GetTotalCallCount())
	}
	// Output:
	// blocked: true
	// open after 2 failures; calls sent: 2
}

// A breaker counts rate-limit events, not refusals: 429s within a second
// of the one counted (or within the wait it asked for) are that event
// again, while every 5xx counts.
func ExampleBreakerPolicy_rateLimitEvents() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(429, ""))
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/down", httpmock.NewStringResponder(503, ""))
	tr := ratewise.New(mock, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}), ratewise.WithoutLearning(),
		ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 3}))
	get := func(path string) {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}

	for range 5 {
		get("/items")
	}
	st := tr.KeyStatus("api.example.com").Breaker
	fmt.Println("after five 429s:", st.State, "with", st.ConsecutiveFailures, "failure")
	get("/down")
	get("/down")
	fmt.Println("after two 503s more:", tr.KeyStatus("api.example.com").Breaker.State)
	// Output:
	// after five 429s: closed with 1 failure
	// after two 503s more: open
}

// A server's documented window, "30 requests per minute", told as it is:
// thirty go at once, the next ones as the first leave the minute.
func ExampleLimit_window() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(200, "[]"))
	tr := ratewise.New(mock, ratewise.WithLimit(ratewise.Limit{Name: "per minute", Burst: 30, Window: time.Minute}))
	for range 12 {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
		resp, _ := tr.RoundTrip(req)
		resp.Body.Close()
	}
	scope := tr.KeyStatus("api.example.com").Scopes[0]
	fmt.Printf("%s: %d of %d may start now, window %v\n", scope.Name, int(scope.Tokens), scope.Burst, scope.Window)
	// Output: per minute: 18 of 30 may start now, window 1m0s
}

// KeyStatus is what a get_throttle_stats tool reports.
func ExampleTransport_KeyStatus() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(200, "[]"))
	tr := ratewise.New(mock, ratewise.WithLimit(ratewise.Limit{Name: "plan", Rate: rate.Every(2 * time.Second), Burst: 30}))
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
		resp, _ := tr.RoundTrip(req)
		resp.Body.Close()
	}
	st := tr.KeyStatus("api.example.com")
	scope := st.Scopes[0]
	fmt.Printf("%s: %d of %d tokens left, %.1f/s, paused %v\n", scope.Name, int(scope.Tokens), scope.Burst, scope.Rate, st.PausedFor)
	// Output: plan: 27 of 30 tokens left, 0.5/s, paused 0s
}

// A job that calls the API through a client of its own (a gRPC stub, an
// SDK that hides its HTTP client) takes its turns of the same limit as the
// transport's requests: here a plan of 30 requests a minute, 5 at once.
func ExampleTransport_Acquire() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items", httpmock.NewStringResponder(200, "[]"))
	tr := ratewise.New(mock, ratewise.WithLimit(ratewise.Limit{Name: "plan", Rate: rate.Every(2 * time.Second), Burst: 5}))
	client := &http.Client{Transport: tr}

	// A batch call of the SDK counts as 3 requests of the plan: wait up
	// to a minute for them, then make it.
	if err := tr.Acquire(context.Background(), "plan", "api.example.com", 3, time.Minute); err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("batch call: 3 turns taken")

	// The transport's requests share what is left.
	for range 2 {
		resp, err := client.Get("https://api.example.com/items")
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}

	// A job that must not wait is refused at once, and told when to come
	// back.
	err := tr.Acquire(context.Background(), "plan", "api.example.com", 1, 0)
	var le *ratewise.ClientLimitError
	if errors.As(err, &le) {
		fmt.Printf("refused by %s (%s), try again in about %v\n", le.Scope, le.Reason, le.RetryIn.Round(time.Second))
	}
	// Output:
	// batch call: 3 turns taken
	// 200
	// 200
	// refused by plan (fail-fast), try again in about 2s
}

// Two transports of one process given the same MemoryStore hold one limit
// together: here, one request a second between them.
func ExampleMemoryStore() {
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	store := ratewise.NewMemoryStore()
	limit := ratewise.Limit{Name: "api", Rate: 1, Burst: 1, Store: store, FailFast: true}
	a := &http.Client{Transport: ratewise.New(mock, ratewise.WithLimit(limit))}
	b := &http.Client{Transport: ratewise.New(mock, ratewise.WithLimit(limit))}

	resp, err := a.Get("https://api.example.com/items")
	if err == nil {
		resp.Body.Close()
		fmt.Println("a:", resp.StatusCode)
	}
	_, err = b.Get("https://api.example.com/items")
	var le *ratewise.ClientLimitError
	fmt.Println("b refused by the shared limit:", errors.As(err, &le))
	// Output:
	// a: 200
	// b refused by the shared limit: true
}

// A running transport takes a limit of its own for the requests Applies
// picks: here GitHub's search API, limited to 30 requests a minute apart
// from the rest of the API, added once the service knows it needs it.
// Other requests pass the scope untouched.
func ExampleTransport_AddLimit() {
	mock := httpmock.NewMockTransport()
	mock.RegisterNoResponder(httpmock.NewStringResponder(200, "{}"))
	tr := ratewise.New(mock)
	err := tr.AddLimit(ratewise.Limit{
		Name:    "search",
		Rate:    rate.Every(2 * time.Second),
		Burst:   30,
		Applies: func(req *http.Request) bool { return strings.HasPrefix(req.URL.Path, "/search/") },
	})
	fmt.Println("added:", err)
	for _, path := range []string{"/search/issues?q=is:open", "/search/code?q=ratewise", "/repos/golang/go"} {
		req, _ := http.NewRequest(http.MethodGet, "https://api.github.com"+path, nil)
		resp, _ := tr.RoundTrip(req)
		resp.Body.Close()
	}
	for _, scope := range tr.KeyStatus("api.github.com").Scopes {
		if scope.Name == "search" {
			fmt.Printf("%s: %d of %d tokens left\n", scope.Name, int(scope.Tokens), scope.Burst)
		}
	}
	fmt.Println("again:", tr.AddLimit(ratewise.Limit{Name: "search", Rate: 1}))
	// Output:
	// added: <nil>
	// search: 28 of 30 tokens left
	// again: ratewise: AddLimit: a limit scope is already named "search": give the new one another Name, or change that one with SetLimit
}

// Two replicas given one store by WithStore share a told limit's bucket
// (and pauses, and breakers): what one takes, the other cannot. Between
// processes the store is ratewise/redis's; a MemoryStore shares between
// transports of one process.
func ExampleWithStore() {
	store := ratewise.NewMemoryStore()
	replica := func() *ratewise.Transport {
		return ratewise.New(nil, ratewise.WithStore(store),
			ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 1, Burst: 5}))
	}
	a, b := replica(), replica()
	ctx := context.Background()
	// a takes the whole burst of api.example.com's bucket; b, at once after,
	// finds none left.
	fmt.Println("a:", a.Acquire(ctx, "api", "api.example.com", 5, 0))
	var limited *ratewise.ClientLimitError
	err := b.Acquire(ctx, "api", "api.example.com", 1, 0)
	fmt.Println("b refused:", errors.As(err, &limited), limited.Reason)
	// Output:
	// a: <nil>
	// b refused: true fail-fast
}

// Replicas given one store learn as one client: a refusal one of them
// sees paces every other, which was never refused. (The refusal comes
// after two requests were let through, as a rate's does: one that comes
// first is tried unpaced, and a load shedder's paces nobody.)
func ExampleWithStore_learnedAsOne() {
	bucket := httpmock.NewMockTransport()
	ok := httpmock.NewStringResponder(200, `["a","b"]`)
	bucket.RegisterResponder(http.MethodGet, "https://api.example.com/items",
		ok.Then(ok).Then(ok).Then(ok).Then(httpmock.NewStringResponder(429, "slow down")))
	store := ratewise.NewMemoryStore()
	refusing := ratewise.New(bucket, ratewise.WithStore(store), ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}))
	other := ratewise.New(fakeAPI(), ratewise.WithStore(store))

	var resp *http.Response
	for range 5 { // four 200s, a bucket's burst, then refused: 429
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
		var err error
		if resp, err = refusing.RoundTrip(req); err != nil {
			fmt.Println("error:", err)
			return
		}
		resp.Body.Close()
	}
	learned := other.KeyStatus("api.example.com").Scopes[0]
	fmt.Printf("%s, refused by %d: the other paces at %.0f requests a second\n", learned.Name, resp.StatusCode, learned.LearnedRate)
	// Output: learned, refused by 429: the other paces at 25 requests a second
}

// By default a GET's 503 is retried, as every retrying client does;
// FinalServerErrors hands it back at once, for a caller that retries
// server errors itself.
func ExampleFinalServerErrors() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items",
		httpmock.NewStringResponder(503, "overloaded").Then(httpmock.NewStringResponder(200, "ok")))

	policy := ratewise.RetryPolicy{Classify: ratewise.FinalServerErrors}
	client := &http.Client{Transport: ratewise.New(mock, ratewise.WithRetry(policy))}
	resp, err := client.Get("https://api.example.com/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", mock.GetTotalCallCount(), "request")
	// Output:
	// 503 after 1 request
}
