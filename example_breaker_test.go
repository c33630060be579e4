package ratewise_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/ratewise/ratewise"
)

// An API that refuses a client it takes for a bot with a 200 and a page
// that says so: BlockPhrases read it as Blocked, which is not retried,
// counts for the breaker, and is an error for CheckResponse.
func ExampleRetryPolicy_blockPhrases() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://www.youtube.com/watch",
		httpmock.NewStringResponder(200, "<html>Sign in to confirm you’re not a bot</html>"))
	tr := ratewise.New(mock, ratewise.WithRetry(ratewise.RetryPolicy{
		BlockPhrases: []string{"confirm you're not a bot", "LOGIN_REQUIRED"},
	}))

	resp, err := (&http.Client{Transport: tr}).Get("https://www.youtube.com/watch?v=x")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, ratewise.CheckResponse(resp))
	fmt.Println("sent", mock.GetTotalCallCount(), "time(s); gave up:", tr.Stats().Aborts[ratewise.GiveUpBlocked])
	// Output:
	// 200 ratewise: blocked by the server (200 OK)
	// sent 1 time(s); gave up: 1
}

// A batch that should stop at the first refusal rather than wait for the
// breaker's reset: with FailFast, a call to an open breaker fails at once
// with its reset, and the status says why it opened.
func ExampleBreakerPolicy_failFast() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder(http.MethodGet, "https://api.example.com/items",
		httpmock.NewStringResponder(503, "backend overloaded\n<html>...</html>"))
	tr := ratewise.New(mock, ratewise.WithRetry(ratewise.RetryPolicy{MaxAttempts: 1}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: time.Hour, FailFast: true}))
	client := &http.Client{Transport: tr}

	for item := range 4 {
		resp, err := client.Get("https://api.example.com/items")
		var open *ratewise.CircuitOpenError
		if errors.As(err, &open) {
			fmt.Printf("item %d: %s, stop the batch\n", item, open.State)
			break
		}
		resp.Body.Close()
		fmt.Printf("item %d: %d\n", item, resp.StatusCode)
	}
	st := tr.KeyStatus("api.example.com").Breaker
	fmt.Printf("opened at level %d by %d %s: %q\n", st.Level, st.Cause.StatusCode, st.Cause.Class, st.Cause.Detail)
	// Output:
	// item 0: 503
	// item 1: 503
	// item 2: open, stop the batch
	// opened at level 0 by 503 retryable: "backend overloaded"
}

// A running transport takes new breaker thresholds and cooldowns for its
// next decision, as it takes a new retry policy.
func ExampleTransport_SetBreakerPolicy() {
	tr := ratewise.New(nil, ratewise.WithBreaker(ratewise.BreakerPolicy{}))
	err := tr.SetBreakerPolicy(ratewise.BreakerPolicy{
		ConsecutiveFailures: 3,
		Cooldown:            time.Hour,
		Escalation:          []time.Duration{6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour},
		Decay:               48 * time.Hour,
		RetripWindow:        24 * time.Hour, // a second detection within 24h waits 6h
	})
	p, _ := tr.BreakerPolicy()
	fmt.Println(err, p.ConsecutiveFailures, p.Rules().Cooldowns)
	fmt.Println(tr.SetBreakerPolicy(ratewise.BreakerPolicy{Key: ratewise.Global}))
	// Output:
	// <nil> 3 [1h0m0s 6h0m0s 12h0m0s 24h0m0s 48h0m0s]
	// ratewise: SetBreakerPolicy cannot change what makes the breakers what they are: its Key
}
