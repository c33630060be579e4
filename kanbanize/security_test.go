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
		c, _ := newClient(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds, Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
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

// kanbanize-rate-limit-plan.md §7 (circuit breaker: repeated 429s within
// a minute slow the client): a storm of refusals stays bounded whatever
// the refusals say. Refused with a Retry-After of a second, each retry
// honours it and is a new rate-limit event: 8 of them within a minute
// open the client's breaker, whose cooldown the next attempt waits.
// Refused without one (429, or 400 RL02), the retries come within a
// second of each other, faster than the shortest wait a hint could ask:
// they are one or two events, and the breaker stays closed. What bounds
// that storm is the backoff, which doubles from 1ms to a second, and the
// attempts.
func TestBreakerSlowsAStormOf429s(t *testing.T) {
	tests := []struct {
		name        string
		cfg         kanbanizetest.Config
		fault       kanbanizetest.Fault
		wantBreaker bool
	}{
		{name: "429 with Retry-After seconds", cfg: kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds},
			fault: kanbanizetest.Fault429, wantBreaker: true},
		{name: "429 without Retry-After", fault: kanbanizetest.Fault429},
		{name: "400 RL02 without Retry-After", cfg: kanbanizetest.Config{RL02: true}, fault: kanbanizetest.FaultRL02},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				cfg.Scripts = scripts(kanbanizetest.EndpointCard, repeat(tt.fault, 30)...)
				c, fake := newClient(t, cfg)
				var mu sync.Mutex
				kinds := map[string]int{}
				opts := quick
				opts.MaxAttempts = 12
				opts.Progress = func(p kanbanize.Progress) { mu.Lock(); kinds[p.Kind]++; mu.Unlock() }
				start := time.Now()
				_, err := c.ReadCardWithRetry(context.Background(), "101", opts)
				if !errors.Is(err, kanbanize.ErrRateLimited) && !errors.Is(err, ratewise.ErrCircuitOpen) {
					t.Fatalf("err = %v", err)
				}
				if got := kinds["breaker"] > 0; got != tt.wantBreaker {
					t.Errorf("waits by kind %v: breaker waits %v, want %v", kinds, got, tt.wantBreaker)
				}
				if n := fake.Stats().Requests; n > 12 {
					t.Errorf("%d requests, want at most the 12 attempts", n)
				}
				// 11 backoffs of 1ms doubling, each at least 80% of its
				// base (the proportional jitter): at least 1.6s.
				if took := time.Since(start); took < 1637*time.Millisecond {
					t.Errorf("the storm lasted %v, want at least the 1.6s of backoff", took)
				}
			})
		})
	}
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
