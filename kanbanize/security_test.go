package kanbanize_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

func TestNewClientErrorsNeverQuoteTheAccount(t *testing.T) {
	for _, account := range []string{
		"https://acme.kanbanize.com/api/v2?apikey=" + secretKey,
		"https://" + secretKey + "@acme.kanbanize.com",
		"https://u:" + secretKey + "@acme.kanbanize.com",
		"https://acme.kanbanize.com/api/v2#" + secretKey,
		"https://acme.kanbanize.com/%zz?apikey=" + secretKey,
		"http://acme.kanbanize.com/" + secretKey,
		secretKey + " corp",
	} {
		_, err := kanbanize.NewClient(account, "k")
		if err == nil {
			t.Errorf("NewClient(%q) gave no error", account)
		} else if strings.Contains(err.Error(), secretKey) {
			t.Errorf("NewClient error shows the secret: %v", err)
		}
	}
	if _, err := kanbanize.NewClient(secretKey, secretKey); err == nil || strings.Contains(err.Error(), secretKey) {
		t.Errorf("the key passed as the account: err = %v, want an error without it", err)
	}
	if _, err := kanbanize.NewClient("acme", secretKey+"\n"); err == nil || strings.Contains(err.Error(), secretKey) {
		t.Errorf("a key with a newline: err = %v, want an error without it", err)
	}
	if _, err := kanbanize.NewClient("http://127.0.0.1:8080", "k"); err != nil {
		t.Errorf("plain http to loopback: %v, want it allowed", err)
	}
}

func TestCardURLOfAnotherAccount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{})
		if _, err := c.ReadCard(context.Background(), "https://other.businessmap.io/ctrl_board/12/cards/101/details/"); !errors.Is(err, kanbanize.ErrBadCardID) {
			t.Errorf("another account's card URL: err = %v, want ErrBadCardID", err)
		}
		if fake.Stats().Requests != 0 {
			t.Errorf("%d requests sent, want none", fake.Stats().Requests)
		}
		if _, err := c.ReadCard(context.Background(), "https://acme.businessmap.io/ctrl_board/12/cards/101/details/"); err != nil {
			t.Errorf("the same account on businessmap.io: %v", err)
		}
	})
}

func TestNoRedirectToAnotherHost(t *testing.T) {
	var gotKey atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey.Store(r.Header.Get("apikey"))
		_, _ = w.Write([]byte(`{"data":{}}`))
	}))
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)+r.URL.Path, http.StatusFound)
	}))
	defer api.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	c, err := kanbanize.NewClient(api.URL, secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadCard(context.Background(), "101"); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("err = %v, want the redirect refused", err)
	}
	if k, _ := gotKey.Load().(string); k != "" {
		t.Errorf("the other host received the key %q", k)
	}
}

// wrapper is a RoundTripper over another, like a tracing middleware, that
// says what it wraps.
type wrapper struct{ next http.RoundTripper }

func (w wrapper) RoundTrip(r *http.Request) (*http.Response, error) { return w.next.RoundTrip(r) }
func (w wrapper) Unwrap() http.RoundTripper                         { return w.next }

func TestNoSecondRatewiseLayer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey,
			Scripts: scripts(kanbanizetest.EndpointCard, repeat(kanbanizetest.Fault429, 10)...)})
		rw := ratewise.New(fake.Transport())
		hc := &http.Client{Transport: wrapper{rw}}
		c, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		if c.Transport() != rw {
			t.Error("Transport() is not the caller's ratewise transport under the wrapper")
		}
		opts := quick
		opts.MaxAttempts = 2
		_, _ = c.ReadCardWithRetry(context.Background(), "101", opts)
		if n := fake.Stats().Requests; n != 2 {
			t.Errorf("%d requests for 2 attempts: a second ratewise layer multiplied them", n)
		}
		if st := rw.Stats(); st.Attempts != 2 || st.RateLimitHits != 2 {
			t.Errorf("the transport's Stats = %+v, want the 2 attempts, both refused", st)
		}
	})
}

func TestProgressFromBothSecondaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
			kanbanizetest.EndpointComments: {kanbanizetest.Fault429},
			kanbanizetest.EndpointSubtasks: {kanbanizetest.Fault429},
		}})
		var seen []string // appended without a lock: the calls come one at a time
		opts := quick
		opts.Progress = func(p kanbanize.Progress) { seen = append(seen, p.Endpoint) }
		start := time.Now()
		env, err := c.ReadCardWithRetry(context.Background(), "102", opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) < 2 {
			t.Errorf("progress from %v, want both secondaries", seen)
		}
		// The secondaries wait side by side: the time spent waiting cannot
		// exceed the time the read took, as a sum of their waits would.
		if elapsed := time.Since(start).Seconds(); env.WaitSeconds < 1 || env.WaitSeconds > elapsed {
			t.Errorf("wait_seconds = %v in a read of %vs, want at least 1 and at most the read", env.WaitSeconds, elapsed)
		}
	})
}

func TestCancelWhileReadingTheCard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newClient(t, kanbanizetest.Config{Latency: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		env, err := c.ReadCardWithRetry(ctx, "101", kanbanize.RetryOptions{})
		if env != nil || !errors.Is(err, context.Canceled) || time.Since(start) != time.Second {
			t.Errorf("ReadCardWithRetry = %v, %v after %v; want context.Canceled after 1s", env, err, time.Since(start))
		}
	})
}

func TestBreakerSlowsAStormOf429s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{Scripts: scripts(kanbanizetest.EndpointCard, repeat(kanbanizetest.Fault429, 30)...)})
		var mu sync.Mutex
		kinds := map[string]int{}
		opts := quick
		opts.MaxAttempts = 12
		opts.Progress = func(p kanbanize.Progress) { mu.Lock(); kinds[p.Kind]++; mu.Unlock() }
		_, err := c.ReadCardWithRetry(context.Background(), "101", opts)
		if !errors.Is(err, kanbanize.ErrRateLimited) && !errors.Is(err, ratewise.ErrCircuitOpen) {
			t.Fatalf("err = %v", err)
		}
		// 8 refusals within a minute open the client's breaker: the next
		// attempt waits its cooldown, longer than the server's 1s.
		if kinds["breaker"] == 0 {
			t.Errorf("waits by kind %v, want the breaker to hold a storm of 429s back", kinds)
		}
		if n := fake.Stats().Requests; n > 12 {
			t.Errorf("%d requests, want at most the 12 attempts", n)
		}
	})
}

func TestOptionBounds(t *testing.T) {
	for _, o := range []kanbanize.RetryOptions{{MaxAttempts: 5000}, {InitialDelayMs: 1 << 40}, {TotalWaitCapMs: 1 << 53}} {
		if err := o.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", o)
		}
	}
}

// kanbanize-rate-limit-plan.md §8 (structured logs): no log line of the
// client or its transport, rate_partial included, holds the API key,
// whatever made a part fail.
func TestLogsNeverHoldTheAPIKey(t *testing.T) {
	for _, fault := range []kanbanizetest.Fault{kanbanizetest.Fault429, kanbanizetest.FaultRL02, kanbanizetest.Fault503,
		kanbanizetest.FaultMalformedJSON, kanbanizetest.FaultReset} {
		t.Run(fault.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs logBuffer
				c, _ := newClient(t, kanbanizetest.Config{Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
					kanbanizetest.EndpointComments: repeat(fault, 3),
					kanbanizetest.EndpointSubtasks: repeat(fault, 3),
				}}, kanbanize.WithLogger(logs.logger()))
				opts := quick
				opts.MaxAttempts = 3
				if _, err := c.ReadCardWithRetry(context.Background(), "101", opts); err != nil {
					t.Fatal(err)
				}
				if got := logs.matching("event=rate_partial"); len(got) != 2 {
					t.Fatalf("rate_partial lines = %q, want the comments' and the subtasks'", logs.lines())
				}
				for _, line := range logs.lines() {
					if strings.Contains(line, secretKey) {
						t.Errorf("a log line holds the API key: %s", line)
					}
				}
			})
		})
	}
}
