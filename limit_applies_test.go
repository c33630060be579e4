package ratewise

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

// isSearch picks the requests of a search API, which GitHub limits apart
// from the rest (30 a minute rather than 5,000 an hour).
func isSearch(req *http.Request) bool { return strings.HasPrefix(req.URL.Path, "/search/") }

// provider-rate-limiting.md (a provider's separate limits): a scope that
// Applies only to /search paces those requests, and the others pass it
// untouched.
func TestLimitAppliesPacesOnlyWhatItPicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(Limit{Name: "search", Rate: rate.Every(2 * time.Second), Burst: 1, Applies: isSearch}))
		get := func(path string) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, "https://api.github.com"+path, nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
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
		if st := tr.LimitStatus("api.github.com").Scopes; len(st) != 1 || st[0].Name != "search" {
			t.Errorf("LimitStatus scopes = %+v, want the search scope alone: it paces, so nothing is learned", st)
		}
	})
}

// provider-rate-limiting.md: Applies is what the scope is, like its Key:
// SetLimit keeps it, and refuses to change it.
func TestSetLimitKeepsApplies(t *testing.T) {
	tr := New(nil, WithLimit(Limit{Name: "search", Rate: 0.5, Applies: isSearch}))
	if err := tr.SetLimit(Limit{Name: "search", Rate: 0.5}); err == nil || !strings.Contains(err.Error(), "its Applies") {
		t.Errorf("SetLimit dropping Applies: err = %v, want it refused", err)
	}
	l := tr.Limits()[0]
	if l.Applies == nil {
		t.Fatal("Limits() lost Applies")
	}
	l.Rate = 1
	if err := tr.SetLimit(l); err != nil {
		t.Errorf("SetLimit with the same Applies: %v", err)
	}
	if got := tr.Limits()[0].Rate; got != 1 {
		t.Errorf("rate after SetLimit = %v, want 1", got)
	}
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
		if st := tr.LimitStatus("api.example.com").Scopes; len(st) != 1 || st[0].LearnedRate != 0 || st[0].Windowed {
			t.Errorf("scope status = %+v, want nothing learned from a request it does not pick", st)
		}
	})
}
