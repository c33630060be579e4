package kanbanize_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secretKey = "secret-key-7f3a9"

// newClient is a client of a fake API, in-process: it works in synctest
// bubbles.
func newClient(t *testing.T, cfg kanbanizetest.Config, opts ...kanbanize.Option) (*kanbanize.Client, *kanbanizetest.Server) {
	t.Helper()
	cfg.APIKey = secretKey
	fake := kanbanizetest.New(cfg)
	opts = append([]kanbanize.Option{kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()})}, opts...)
	c, err := kanbanize.NewClient("acme", secretKey, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c, fake
}

func scripts(e kanbanizetest.Endpoint, faults ...kanbanizetest.Fault) map[kanbanizetest.Endpoint][]kanbanizetest.Fault {
	return map[kanbanizetest.Endpoint][]kanbanizetest.Fault{e: faults}
}

func repeat(f kanbanizetest.Fault, n int) []kanbanizetest.Fault {
	out := make([]kanbanizetest.Fault, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// quick are options whose backoff never outlasts a one-second Retry-After,
// so waits are exactly the server's.
var quick = kanbanize.RetryOptions{InitialDelayMs: 1, FullJitter: ptr(false)}

func ptr[T any](v T) *T { return &v }

func TestReadCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{})
		d, err := c.ReadCard(context.Background(), "https://acme.kanbanize.com/ctrl_board/12/cards/102/details/")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := fake.Card(102)
		if d.Card.Title != want.Card.Title || d.Card.CardID != 102 || len(d.Comments) != 2 || len(d.Subtasks) != 2 {
			t.Errorf("ReadCard(102) = %q #%d with %d comments and %d subtasks; want %q with 2 and 2",
				d.Card.Title, d.Card.CardID, len(d.Comments), len(d.Subtasks), want.Card.Title)
		}
		finished := 0
		for _, s := range d.Subtasks {
			if s.Finished() {
				finished++
			}
		}
		if finished != 1 || d.Card.FinishedSubtaskCount != 1 || d.Card.CreatedAt.IsZero() {
			t.Errorf("subtasks finished %d, card says %d, created %v; want 1, 1 and a time", finished, d.Card.FinishedSubtaskCount, d.Card.CreatedAt)
		}
	})
}

func TestReadCardDoesNotRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointCard, kanbanizetest.Fault429)})
		_, err := c.ReadCard(context.Background(), "101")
		if !errors.Is(err, kanbanize.ErrRateLimited) || fake.Stats().Requests != 1 {
			t.Errorf("err = %v after %d requests; want ErrRateLimited after 1", err, fake.Stats().Requests)
		}
	})
}

// pacedAtMost bounds the pace a key keeps for its next requests after
// refusals that asked for a second: no refusal slows a pace below one
// request per its hint.
const pacedAtMost = time.Second

// kanbanize-rate-limit-plan.md §10 (error handling matrix: "429 with
// Retry-After: honor header exactly"; "429 without Retry-After: compute
// backoff with full jitter") and §4 (RL02 counts as rate-limited): the
// card refused twice is read on its third attempt whatever the refusal
// says. Nothing public says the real API sends Retry-After, so the
// refusals without it are the case to expect; with it, the client waits
// exactly what it asks.
func TestRetryPathRefusalForms(t *testing.T) {
	tests := []struct {
		name  string
		cfg   kanbanizetest.Config
		fault kanbanizetest.Fault
		// The read takes at least min and at most max: the hints it
		// honours, then the backoff and the pace the refusals taught.
		min, max time.Duration
	}{
		{name: "429 with Retry-After seconds", cfg: kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds},
			fault: kanbanizetest.Fault429, min: 2 * time.Second, max: 2*time.Second + pacedAtMost},
		{name: "429 with Retry-After date", cfg: kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterHTTPDate},
			fault: kanbanizetest.Fault429, min: 2 * time.Second, max: 2*time.Second + pacedAtMost},
		// Two backoffs of 1ms and 2ms, ±20%, and the pace: well under
		// the second a Retry-After would have asked.
		{name: "429 without Retry-After", cfg: kanbanizetest.Config{},
			fault: kanbanizetest.Fault429, min: 2400 * time.Microsecond, max: pacedAtMost},
		{name: "400 RL02 without Retry-After", cfg: kanbanizetest.Config{RL02: true},
			fault: kanbanizetest.FaultRL02, min: 2400 * time.Microsecond, max: pacedAtMost},
		{name: "400 RL02 with Retry-After seconds", cfg: kanbanizetest.Config{RL02: true, RetryAfter: kanbanizetest.RetryAfterSeconds},
			fault: kanbanizetest.FaultRL02, min: 2 * time.Second, max: 2*time.Second + pacedAtMost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				cfg.Scripts = scripts(kanbanizetest.EndpointCard, tt.fault, tt.fault)
				c, fake := newClient(t, cfg)
				start := time.Now()
				env, err := c.ReadCardWithRetry(context.Background(), "102", quick)
				if err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got < tt.min || got > tt.max {
					t.Errorf("took %v, want within [%v, %v]", got, tt.min, tt.max)
				}
				if env.Attempts["card"] != 3 || env.RateLimitHits != 2 || !env.Completed["comments"] || !env.Completed["subtasks"] {
					t.Errorf("envelope = %+v, want the card on its third attempt after 2 refusals, and the rest read", env)
				}
				if st := fake.Stats(); st.Requests != 5 || st.Limited != 2 {
					t.Errorf("server stats = %+v, want 5 requests, 2 of them refused", st)
				}
			})
		})
	}
}

func TestFullJitterBounds(t *testing.T) {
	p := kanbanize.RetryOptions{}.RetryPolicy()
	for retry, base := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		for range 10000 {
			if d := p.Backoff(retry); d < 0 || d > base {
				t.Fatalf("Backoff(%d) = %v, want within [0, %v]", retry, d, base)
			}
		}
	}
	prop := kanbanize.RetryOptions{FullJitter: ptr(false)}.RetryPolicy()
	for range 10000 {
		if d := prop.Backoff(0); d < 4*time.Second || d > 6*time.Second {
			t.Fatalf("without full jitter: Backoff(0) = %v, want 5s ± 20%%", d)
		}
	}
}

func TestMaxAttemptsExceeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointCard, repeat(kanbanizetest.Fault429, 20)...)})
		env, err := c.ReadCardWithRetry(context.Background(), "101", quick)
		var re *kanbanize.ReadError
		var ae *kanbanize.APIError
		if env != nil || !errors.As(err, &re) || !errors.As(err, &ae) || !errors.Is(err, kanbanize.ErrRateLimited) {
			t.Fatalf("ReadCardWithRetry = %v, %v; want a ReadError over a 429 APIError", env, err)
		}
		if re.Endpoint != "card" || re.Attempts != 10 || re.Reason != "max retries exceeded (429)" || ae.StatusCode != 429 || ae.Code != "RL01" {
			t.Errorf("ReadError = %+v, APIError = %+v", *re, *ae)
		}
		if want := "kanbanize: reading card 101: max retries exceeded (429), after 10 attempts"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err, want)
		}
		if fake.Stats().ByEndpoint[kanbanizetest.EndpointComments] != 0 {
			t.Error("comments were read after the card failed")
		}
	})
}

func TestPartialResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointComments, repeat(kanbanizetest.Fault429, 20)...)})
		env, err := c.ReadCardWithRetry(context.Background(), "102", quick)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := fake.Card(102)
		if env.Data.Card == nil || env.Data.Title != want.Card.Title || len(env.Data.Subtasks) != 2 || len(env.Data.Comments) != 0 {
			t.Errorf("data = %+v, want the card and its subtasks, no comments", env.Data)
		}
		js, _ := json.Marshal(env)
		for _, w := range []string{
			`{"card_id":"102","attempts":{"card":1,"comments":10,"subtasks":1},"wait_seconds":`,
			`"completed":{"card":true,"comments":false,"subtasks":true},"partial_error":{"comments":"max retries exceeded (429)"},"data":{"title":"Migrate invoices to the new schema","card":{`,
			`"comments":[],"subtasks":[{`,
		} {
			if !strings.Contains(string(js), w) {
				t.Errorf("envelope JSON lacks %s:\n%s", w, js)
			}
		}
	})
}

func TestFailOnPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointSubtasks, repeat(kanbanizetest.Fault429, 20)...)})
		opts := quick
		opts.FailOnPartial = true
		env, err := c.ReadCardWithRetry(context.Background(), "102", opts)
		var re *kanbanize.ReadError
		if env != nil || !errors.As(err, &re) || re.Endpoint != "subtasks" {
			t.Fatalf("ReadCardWithRetry = %v, %v; want a ReadError for the subtasks", env, err)
		}
	})
}

func TestEnvelopeWithoutFailuresOmitsPartialError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{})
		env, err := c.ReadCardWithRetry(context.Background(), "100", kanbanize.RetryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(env)
		if strings.Contains(string(js), "partial_error") || !strings.Contains(string(js), `"comments":[],"subtasks":[]`) {
			t.Errorf("envelope of a card with nothing missing = %s", js)
		}
	})
}

func TestCancelledMidSleepKeepsWhatWasRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointComments, kanbanizetest.Fault429)})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Second, cancel)
		opts := kanbanize.RetryOptions{InitialDelayMs: 60000, FullJitter: ptr(false)} // the comments' retry waits a minute, ±20%
		start := time.Now()
		env, err := c.ReadCardWithRetry(ctx, "102", opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("returned after %v, want at the cancel, 10s", got)
		}
		if !env.Completed["card"] || !env.Completed["subtasks"] || env.Completed["comments"] || env.PartialError["comments"] != "canceled" {
			t.Errorf("envelope = %+v, want the card and subtasks kept and the comments canceled", env)
		}
	})
}

func TestNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{})
		_, err := c.ReadCardWithRetry(context.Background(), "9999", kanbanize.RetryOptions{})
		var re *kanbanize.ReadError
		if !errors.Is(err, kanbanize.ErrNotFound) || !errors.As(err, &re) || re.Reason != "404 Not Found (CA01): Card not found." {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if fake.Stats().Requests != 1 {
			t.Errorf("%d requests, want 1: a 404 is not retried", fake.Stats().Requests)
		}
	})
}

func TestMalformedJSONIsAPartialError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointSubtasks, kanbanizetest.FaultMalformedJSON)})
		env, err := c.ReadCardWithRetry(context.Background(), "102", kanbanize.RetryOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if msg := env.PartialError["subtasks"]; !strings.Contains(msg, "malformed JSON") || !env.Completed["comments"] {
			t.Errorf("partial errors = %v, want the subtasks' malformed JSON", env.PartialError)
		}
	})
}

// An account refused by its plan's limit with 400 RL02 gets an APIError
// that matches both ErrRateLimited.
func TestRL02MatchesErrRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		all := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, RL02: true, PerMinute: 1})
		c, _ := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: all.Transport()}))
		_, _ = c.ReadCard(context.Background(), "101")
		_, err := c.ReadCard(context.Background(), "101")
		var ae *kanbanize.APIError
		if !errors.As(err, &ae) || ae.StatusCode == 429 || ae.Code != "RL02" || !errors.Is(err, kanbanize.ErrRateLimited) || !errors.Is(err, ratewise.ErrRateLimited) {
			t.Errorf("err = %v, want an RL02 APIError that matches both ErrRateLimited", err)
		}
	})
}

func TestTransientFaultsAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
			kanbanizetest.EndpointCard:     {kanbanizetest.FaultReset},
			kanbanizetest.EndpointSubtasks: {kanbanizetest.Fault503},
		}})
		env, err := c.ReadCardWithRetry(context.Background(), "102", quick)
		if err != nil {
			t.Fatal(err)
		}
		if env.Attempts["card"] != 2 || env.Attempts["subtasks"] != 2 || env.PartialError != nil {
			t.Errorf("envelope = %+v, want a reset card and a 503 subtasks each read on the second try", env)
		}
	})
}

func TestSecondariesInParallelRaceFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Latency: time.Second})
		var wg sync.WaitGroup
		start := time.Now()
		for id := 100; id < 120; id++ {
			wg.Go(func() {
				env, err := c.ReadCardWithRetry(context.Background(), kanbanize.ID(id).String(), kanbanize.RetryOptions{})
				if err != nil || env.Data.Card.CardID != kanbanize.ID(id) {
					t.Errorf("card %d: %v", id, err)
				}
			})
		}
		wg.Wait()
		// The key's slow start: 1, 2, 4, 8, 16 and the rest of the 60
		// requests in flight, one latency apart, as each success lets one
		// more go, and the last subtasks a latency after their card: 6 or
		// 7 latencies, as the cards and their secondaries take the places.
		if got := time.Since(start); got < 6*time.Second || got > 7*time.Second {
			t.Errorf("20 reads took %v, want 6s or 7s", got)
		}
	})
}

func TestProgressReportsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds,
			Scripts: scripts(kanbanizetest.EndpointCard, kanbanizetest.Fault429)})
		var got []kanbanize.Progress
		opts := quick
		opts.Progress = func(p kanbanize.Progress) { got = append(got, p) }
		if _, err := c.ReadCardWithRetry(context.Background(), "100", opts); err != nil {
			t.Fatal(err)
		}
		// The card's retry, then, for comments and subtasks, the pace the
		// refusal taught the key.
		want := kanbanize.Progress{Endpoint: "card", Attempt: 2, Delay: time.Second, Kind: "backoff"}
		if len(got) == 0 || got[0] != want {
			t.Fatalf("progress = %+v, want [%+v] first", got, want)
		}
		for _, p := range got[1:] {
			if p.Kind != "pacing" || p.Delay > pacedAtMost || p.Endpoint == "card" {
				t.Errorf("progress = %+v after the card's retry, want only the pace of comments and subtasks", got)
			}
		}
	})
}

func TestAPIKeyNeverShows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kanbanizetest.New(kanbanizetest.Config{APIKey: "another-key",
			Scripts: scripts(kanbanizetest.EndpointComments, repeat(kanbanizetest.Fault429, 20)...)})
		c, _ := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
		_, err := c.ReadCardWithRetry(context.Background(), "102", kanbanize.RetryOptions{})
		if !errors.Is(err, kanbanize.ErrUnauthorized) || strings.Contains(err.Error(), secretKey) {
			t.Errorf("err = %v, want ErrUnauthorized without the key", err)
		}
		good, _ := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointComments, repeat(kanbanizetest.Fault429, 20)...)})
		env, err := good.ReadCardWithRetry(context.Background(), "102", quick)
		js, _ := json.Marshal(env)
		if err != nil || strings.Contains(string(js), secretKey) {
			t.Errorf("envelope %s, err %v: the key must never show", js, err)
		}
	})
}

func TestOverLoopback(t *testing.T) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey,
		Scripts: scripts(kanbanizetest.EndpointComments, kanbanizetest.Fault503)})
	defer fake.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	c, err := kanbanize.NewClient(fake.Start(), secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.ReadCardWithRetry(context.Background(), "103", kanbanize.RetryOptions{InitialDelayMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if env.Attempts["comments"] != 2 || len(env.Data.Comments) != 3 || len(env.Data.Subtasks) != 3 || env.PartialError != nil {
		t.Errorf("envelope over loopback = %+v", env)
	}
}
