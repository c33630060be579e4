package ratewise

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// kanbanize-rate-limit-plan.md §1 (stay under the published limits): a
// limit added to a running transport paces the requests that come after,
// as one given to New does, and shows in Limits and KeyStatus.
func TestAddLimitPacesWhatComesNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock())
		for range 3 {
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.AddLimit(Limit{Name: "api", Rate: rate.Every(time.Second), Burst: 2}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range 4 {
			if _, err := callOnce(t, tr, context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// The burst of 2 at once, then one a second.
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("4 calls at 1/s, burst 2, took %v, want 2s", took)
		}
		names := []string{}
		for _, l := range tr.Limits() {
			names = append(names, l.Name)
		}
		if strings.Join(names, ",") != "api,"+LearnedScope {
			t.Errorf("Limits() are named %v, want api, then the learned scope kept last", names)
		}
		st := tr.KeyStatus("api.example.com")
		if len(st.Scopes) != 2 || st.Scopes[0].Name != "api" || st.Scopes[0].Rate != 1 || st.Scopes[0].Burst != 2 {
			t.Errorf("KeyStatus = %+v, want the added scope at 1/s, burst 2", st.Scopes)
		}
	})
}

func TestAddLimitRefusals(t *testing.T) {
	tr := New(nil, WithLimit(Limit{Name: "api", Rate: 1}))
	for _, tt := range []struct {
		give Limit
		want string
	}{
		{Limit{Name: "api", Rate: 5}, `AddLimit: a limit scope is already named "api"`},
		{Limit{Name: "bad", Rate: 1, MinSpacing: time.Second}, "has both Rate"},
		{Limit{Name: "negative", Burst: -1}, "Burst (-1)"},
	} {
		if err := tr.AddLimit(tt.give); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("AddLimit(%+v) = %v, want %q", tt.give, err, tt.want)
		}
	}
	if n := len(tr.Limits()); n != 2 {
		t.Errorf("refused AddLimits left %d scopes, want 2: api and the learned scope", n)
	}
	// Unnamed, it is named as WithLimit names one: by its place among
	// the scopes given, before the learned scope.
	if err := tr.AddLimit(Limit{Rate: 2}); err != nil || tr.Limits()[1].Name != "limit 2" || tr.Limits()[2].Name != LearnedScope {
		t.Errorf("AddLimit of an unnamed Limit: %v, scopes %v; want limit 2 before the learned scope", err, scopeNames(tr))
	}
}

// An Adaptive scope added makes the transport learn from the answers to
// requests it did not pace, as New does for one given.
func TestAddLimitAdaptiveLearns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		tr := New(s.mock(), WithoutLearning(), WithRetry(RetryPolicy{MaxAttempts: 1}))
		learned := func() bool {
			for _, st := range tr.KeyStatus(host).Scopes {
				if st.LearnedRate > 0 {
					return true
				}
			}
			return false
		}
		_, _ = callOnce(t, tr, context.Background())
		if learned() {
			t.Fatal("a transport without learning learned from a refusal")
		}
		if err := tr.AddLimit(Limit{Name: "tokens", Adaptive: true}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		_, _ = callOnce(t, tr, context.Background())
		if !learned() {
			t.Errorf("an Adaptive scope was added, yet a refusal taught it nothing: %+v", tr.KeyStatus(host).Scopes)
		}
	})
}

// AddLimit while requests go through the transport: each request sees the
// scopes before or after, whole (run under -race).
func TestAddLimitDuringRoundTrips(t *testing.T) {
	s := newScript(answer(200))
	tr := New(s.mock(), WithLimit(Limit{Name: "first", Rate: rate.Inf}))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, testURL, nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				_ = resp.Body.Close()
			}
		})
	}
	for i := range 50 {
		if err := tr.AddLimit(Limit{Name: "added " + strings.Repeat("x", i), Rate: rate.Inf, MaxConcurrent: 100}); err != nil {
			t.Error(err)
		}
		_ = tr.SetLimit(Limit{Name: "first", Rate: rate.Inf, MaxConcurrent: 10 + i})
	}
	close(stop)
	wg.Wait()
	if n := len(tr.Limits()); n != 52 { // the learned scope, first and the 50 added
		t.Errorf("%d scopes, want 52", n)
	}
	s.assertAllClosed(t)
}

// scopeNames returns the Names of tr's scopes, in order.
func scopeNames(tr *Transport) []string {
	var names []string
	for _, l := range tr.Limits() {
		names = append(names, l.Name)
	}
	return names
}
