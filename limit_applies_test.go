package ratewise

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"

	"golang.org/x/time/rate"
)

// isSearch picks the requests of a search API, which GitHub limits apart
// from the rest (30 a minute rather than 5,000 an hour).
func isSearch(req *http.Request) bool { return strings.HasPrefix(req.URL.Path, "/search/") }

// getGitHub sends a GET of path on api.github.com through tr and reads
// its answer, failing t on an error.
func getGitHub(t *testing.T, tr http.RoundTripper, path string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com"+path, nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
}

// provider-rate-limiting.md (a provider's separate limits): a scope that
// Applies only to /search paces those requests, and the others pass it
// untouched.
func TestLimitAppliesPacesOnlyWhatItPicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "search", Rate: rate.Every(2 * time.Second), Burst: 1, Applies: isSearch}))
		get := func(path string) { t.Helper(); getGitHub(t, tr, path) }
		start := time.Now()
		for range 5 {
			get("/repos/o/r/issues")
		}
		if took := time.Since(start); took != 0 {
			t.Errorf("5 requests the scope does not pick took %v, want none", took)
		}
		for range 3 {
			get("/search/issues")
		}
		if took := time.Since(start); took != 4*time.Second {
			t.Errorf("3 searches at one per 2s took %v, want 4s", took)
		}
		// The searches spent the bucket; the others still go at once.
		mid := time.Now()
		get("/repos/o/r/pulls")
		if took := time.Since(mid); took != 0 {
			t.Errorf("a request the scope does not pick waited %v behind the searches", took)
		}
		if st := tr.KeyStatus("api.github.com").Scopes; len(st) != 2 || st[0].Name != "search" || st[1].LearnedRate != 0 {
			t.Errorf("KeyStatus scopes = %+v, want the search scope, then the learned scope with nothing learned", st)
		}
	})
}

// provider-rate-limiting.md: SetLimit finds a scope by its Name and
// keeps its Applies: a Limit that leaves Applies out changes the rate and
// still picks the searches alone.
func TestSetLimitKeepsApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "search", Rate: 0.5, Applies: isSearch}))
		if err := tr.SetLimit(Limit{Name: "search", Rate: 1}); err != nil {
			t.Fatalf("SetLimit without Applies: %v", err)
		}
		l := tr.Limits()[0]
		if l.Applies == nil || l.Rate != 1 {
			t.Fatalf("Limits()[0] = %+v, want Applies kept and Rate 1", l)
		}
		get := func(path string) { t.Helper(); getGitHub(t, tr, path) }
		start := time.Now()
		get("/search/issues")
		get("/search/issues")
		if took := time.Since(start); took != time.Second {
			t.Errorf("2 searches at the new 1/s took %v, want 1s", took)
		}
		mid := time.Now()
		get("/repos/o/r/issues")
		if took := time.Since(mid); took != 0 {
			t.Errorf("a request Applies leaves out waited %v: SetLimit dropped Applies", took)
		}
	})
}

// SetLimit names a scope, and never compares funcs: the same
// ByHeader("Authorization") is accepted (a new closure each call), and a
// different KeyFunc leaves the scope keyed as it was, as Limits says.
func TestSetLimitKeepsTheScopesKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "per token", Rate: 1, Key: ByHeader("Authorization")}))
		if err := tr.SetLimit(Limit{Name: "per token", Rate: 1, Key: ByHeader("Authorization")}); err != nil {
			t.Fatalf("SetLimit with the same ByHeader: %v", err)
		}
		if err := tr.SetLimit(Limit{Name: "per token", Rate: 1, Key: ByHeader("X-Other")}); err != nil {
			t.Fatalf("SetLimit with another ByHeader: %v", err)
		}
		send := func(token string) {
			t.Helper()
			req := mustRequest(t, http.MethodGet, nil)
			req.Header.Set("Authorization", token)
			req.Header.Set("X-Other", "same")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		start := time.Now()
		send("token a")
		send("token b")
		if took := time.Since(start); took != 0 {
			t.Errorf("two tokens at 1/s each took %v, want 0: the scope is still keyed by Authorization", took)
		}
		req := mustRequest(t, http.MethodGet, nil)
		req.Header.Set("Authorization", "token a")
		if got, want := tr.Limits()[0].Key(req), ByHeader("Authorization")(req); got != want {
			t.Errorf("Limits()[0].Key = %q, want %q, the key the scope keeps", got, want)
		}
	})
}

// hostIs picks the requests to one host.
func hostIs(host string) func(*http.Request) bool {
	return func(req *http.Request) bool { return req.URL.Host == host }
}

// A told limit for one host leaves the other hosts learned, given to New
// or added later: a refusal from another host teaches its learned pace.
func TestAppliesLimitLeavesOtherHostsLearned(t *testing.T) {
	told := Limit{Name: "a only", Rate: 1, Applies: hostIs("a.test")}
	for _, tt := range []struct {
		name string
		make func(base http.RoundTripper) *Transport
	}{
		{"WithLimit", func(base http.RoundTripper) *Transport { return New(base, WithLimit(told)) }},
		{"AddLimit", func(base http.RoundTripper) *Transport {
			tr := New(base)
			if err := tr.AddLimit(told); err != nil {
				t.Fatal(err)
			}
			return tr
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Four let through, then a refusal: a rate's (a refusal
				// after fewer is tried first, see internal/learn/shed.go).
				s := newScript(answer(200), answer(200), answer(200), answer(200), answer(429), answer(200))
				tr := tt.make(s.mock())
				for range 5 {
					req, _ := http.NewRequest(http.MethodGet, "https://b.test/items", nil)
					resp, err := tr.RoundTrip(req.WithContext(noWait()))
					if err != nil {
						t.Fatal(err)
					}
					readAll(t, resp)
				}
				var learned *ScopeStatus
				for _, st := range tr.KeyStatus("b.test").Scopes {
					if st.Name == LearnedScope {
						learned = &st
					}
				}
				if learned == nil || learned.LearnedRate <= 0 || math.IsInf(learned.LearnedRate, 0) {
					t.Errorf("b.test's scopes %+v, want a learned pace after its refusal", tr.KeyStatus("b.test").Scopes)
				}
			})
		})
	}
}

// Whether a short hint pauses a key is decided by the scopes that apply
// to it: a limit that paces a.test answers a.test's short hints with its
// pace, while b.test, which nothing paces, is paused by its own.
func TestShortHintPausesAHostNothingPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		arrived := map[string][]time.Duration{}
		start := time.Now()
		// The first answer of each host is a 429 with Retry-After: 1.
		base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			h := req.URL.Host
			arrived[h] = append(arrived[h], time.Since(start))
			if len(arrived[h]) == 1 {
				resp := httpmock.NewStringResponse(429, "slow down")
				resp.Header.Set("Retry-After", "1")
				return resp, nil
			}
			return httpmock.NewStringResponse(200, "ok"), nil
		})
		tr := New(base, WithoutLearning(), WithLimit(Limit{Name: "a only", Rate: 100, Burst: 10, Applies: hostIs("a.test")}))
		var wg sync.WaitGroup
		for _, h := range []string{"a.test", "b.test"} {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "https://"+h+"/items", nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
			})
			synctest.Wait() // the 429, and its retry waiting its hint
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodGet, "https://"+h+"/items", nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
			})
		}
		wg.Wait()
		if got := arrived["a.test"]; len(got) != 3 || got[1] != 0 {
			t.Errorf("a.test's requests arrived at %v, want the second at once: its pace answers the short hint", got)
		}
		if got := arrived["b.test"]; len(got) != 3 || got[1] < time.Second {
			t.Errorf("b.test's requests arrived at %v, want none before the hint's 1s: nothing paces b.test", got)
		}
	})
}

// An adaptive scope learns nothing from a request it does not pick: a
// refusal of another API's leaves its keys unpaced.
func TestAdaptiveScopeLearnsOnlyWhatItApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(200))
		tr := New(s.mock(), WithoutLearning(), WithLimit(Limit{Name: "search", Adaptive: true, Applies: isSearch}))
		if _, err := callOnce(t, tr, context.Background()); err != nil { // testURL: /items, not a search
			t.Fatal(err)
		}
		if st := tr.KeyStatus("api.example.com").Scopes; len(st) != 1 || st[0].LearnedRate != 0 || st[0].Windowed {
			t.Errorf("scope status = %+v, want nothing learned from a request it does not pick", st)
		}
	})
}
