package composite

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/ratewisetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// api is a fake API with one responder per path, under a ratewise
// transport without the pause gate, so branches wait only for their own
// refusals.
func api(t *testing.T, responders map[string]httpmock.Responder) *http.Client {
	t.Helper()
	mock := httpmock.NewMockTransport()
	for path, r := range responders {
		mock.RegisterResponder(http.MethodGet, "https://api.example.com"+path, r)
	}
	// The endpoints' scripted refusals are each their own: nothing holds
	// one endpoint for another's (no cooldown, no learned pace of the host).
	return &http.Client{Transport: ratewise.New(mock, ratewise.WithPause(ratewise.PausePolicy{Off: true}), ratewise.WithoutLearning())}
}

// fetch is a branch that GETs path and stores the body in *into.
func fetch(client *http.Client, name, path string, into *string) Branch {
	return Branch{Name: name, Call: func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com"+path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if err := ratewise.CheckResponse(resp); err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		*into = string(b)
		return err
	}}
}

func ok(body string) httpmock.Responder { return httpmock.NewStringResponder(200, body) }

func TestRunAllComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := api(t, map[string]httpmock.Responder{
			"/card":     ratewisetest.RateLimitedThen(1, "2", ok("card")),
			"/comments": ratewisetest.RateLimitedThen(2, "3", ok("comments")),
			"/subtasks": ok("subtasks"),
		})
		var card, comments, subtasks string
		start := time.Now()
		res, err := Run(context.Background(), fetch(client, "card", "/card", &card),
			[]Branch{fetch(client, "comments", "/comments", &comments), fetch(client, "subtasks", "/subtasks", &subtasks)},
			Options{Budget: time.Minute})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if card != "card" || comments != "comments" || subtasks != "subtasks" {
			t.Errorf("results = %q, %q, %q", card, comments, subtasks)
		}
		var names []string
		var attempts []int
		for _, o := range res.Branches {
			names, attempts = append(names, o.Name), append(attempts, o.Attempts)
			if !o.Completed || o.Err != nil || o.LastStatus != 200 {
				t.Errorf("%s: completed %v, err %v, last status %d; want complete with a 200", o.Name, o.Completed, o.Err, o.LastStatus)
			}
		}
		if !slices.Equal(names, []string{"card", "comments", "subtasks"}) || !slices.Equal(attempts, []int{2, 3, 1}) {
			t.Errorf("branches %v with attempts %v, want card, comments, subtasks with 2, 3, 1", names, attempts)
		}
		if res.Waited() != 8*time.Second || res.RateLimitHits() != 3 {
			t.Errorf("waited %v with %d rate-limit hits, want 8s and 3", res.Waited(), res.RateLimitHits())
		}
		// The card's 2s, then the comments' 3s+3s while the subtasks ran.
		if got := time.Since(start); got != 8*time.Second {
			t.Errorf("took %v, want 8s: secondaries run in parallel", got)
		}
	})
}

func TestRunPrimaryFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mockCalls := 0
		client := api(t, map[string]httpmock.Responder{
			"/card": httpmock.NewStringResponder(404, "no such card"),
			"/comments": func(*http.Request) (*http.Response, error) {
				mockCalls++
				return httpmock.NewStringResponse(200, "x"), nil
			},
		})
		var card, comments string
		notFound := errors.New("not found")
		primary := fetch(client, "card", "/card", &card)
		call := primary.Call
		primary.Call = func(ctx context.Context) error {
			if err := call(ctx); err != nil {
				return err
			}
			if card == "no such card" {
				return notFound
			}
			return nil
		}
		res, err := Run(context.Background(), primary, []Branch{fetch(client, "comments", "/comments", &comments)}, Options{})
		var be *BranchError
		if !errors.As(err, &be) || !errors.Is(err, notFound) || len(be.Failed) != 1 || be.Failed[0].Name != "card" {
			t.Fatalf("err = %v, want a BranchError for the card", err)
		}
		if mockCalls != 0 || len(res.Branches) != 1 {
			t.Errorf("secondaries ran (%d calls, %d outcomes) after the primary failed", mockCalls, len(res.Branches))
		}
	})
}

func TestRunPartial(t *testing.T) {
	for _, failOnPartial := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			client := api(t, map[string]httpmock.Responder{
				"/card":     ok("card"),
				"/comments": ok("comments"),
				"/subtasks": ratewisetest.RateLimited("1"),
			})
			var card, comments, subtasks string
			res, err := Run(context.Background(), fetch(client, "card", "/card", &card),
				[]Branch{fetch(client, "comments", "/comments", &comments), fetch(client, "subtasks", "/subtasks", &subtasks)},
				Options{FailOnPartial: failOnPartial})
			sub, _ := res.Outcome("subtasks")
			if sub.Completed || !errors.Is(sub.Err, ratewise.ErrRateLimited) || sub.Attempts != ratewise.DefaultMaxAttempts {
				t.Errorf("subtasks outcome = %+v, want failed, rate-limited, after %d attempts", sub, ratewise.DefaultMaxAttempts)
			}
			if c, _ := res.Outcome("comments"); !c.Completed || comments != "comments" {
				t.Errorf("comments = %+v %q, want completed", c, comments)
			}
			if failOnPartial {
				var be *BranchError
				if !errors.As(err, &be) || !errors.Is(err, ratewise.ErrRateLimited) {
					t.Errorf("FailOnPartial: err = %v, want a BranchError for the subtasks", err)
				}
			} else if err != nil {
				t.Errorf("err = %v, want partial results without an error", err)
			}
		})
	}
}

func TestRunSharesOneBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := api(t, map[string]httpmock.Responder{
			"/card": ratewisetest.RateLimitedThen(1, "30", ok("card")),
			"/a":    ratewisetest.RateLimitedThen(1, "8", ok("a")),
			"/b":    ratewisetest.RateLimitedThen(1, "8", ok("b")),
			"/c":    ratewisetest.RateLimitedThen(1, "15", ok("c")),
		})
		var card, a, b, c string
		res, err := Run(context.Background(), fetch(client, "card", "/card", &card),
			[]Branch{fetch(client, "a", "/a", &a), fetch(client, "b", "/b", &b), fetch(client, "c", "/c", &c)},
			Options{Budget: 40 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		// 30s for the card leaves 10s. a and b wait the same 8s side by
		// side, paid once; c's 15s do not fit.
		failed := res.Failed()
		if len(failed) != 1 || failed[0].Name != "c" || a != "a" || b != "b" {
			t.Errorf("failed %v, want only c", failed)
		}
		if res.BudgetSpent != 38*time.Second || res.Waited() != 46*time.Second {
			t.Errorf("budget spent %v, branches waited %v in all; want 38s and 46s", res.BudgetSpent, res.Waited())
		}
	})
}

func TestRunCancelledMidWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := api(t, map[string]httpmock.Responder{
			"/card":     ok("card"),
			"/comments": ratewisetest.RateLimitedThen(1, "60", ok("comments")),
			"/subtasks": ok("subtasks"),
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Second, cancel)
		var card, comments, subtasks string
		start := time.Now()
		res, err := Run(ctx, fetch(client, "card", "/card", &card),
			[]Branch{fetch(client, "comments", "/comments", &comments), fetch(client, "subtasks", "/subtasks", &subtasks)},
			Options{Budget: 5 * time.Minute})
		if err != nil {
			t.Fatalf("Run: %v, want the partial result", err)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("returned after %v, want at the cancel, 10s", got)
		}
		c, _ := res.Outcome("comments")
		s, _ := res.Outcome("subtasks")
		if card != "card" || !s.Completed || c.Completed || !errors.Is(c.Err, context.Canceled) {
			t.Errorf("card %q, subtasks %+v, comments %+v; want card and subtasks kept, comments cancelled", card, s, c)
		}
	})
}

func TestRunRefusesDuplicateNames(t *testing.T) {
	called := false
	call := func(context.Context) error { called = true; return nil }
	_, err := Run(context.Background(), Branch{Name: "a", Call: call}, []Branch{{Name: "b", Call: call}, {Name: "a", Call: call}}, Options{})
	if err == nil || called {
		t.Errorf("Run with two branches named a: err %v, called %v; want an error and no call", err, called)
	}
}

func TestRunBranchWithoutCall(t *testing.T) {
	_, err := Run(context.Background(), Branch{Name: "card"}, nil, Options{})
	if !errors.Is(err, ErrNoCall) {
		t.Errorf("err = %v, want ErrNoCall", err)
	}
}
