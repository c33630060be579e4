package kanbanize_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// kanbanize-rate-limit-plan.md §16 (open questions) and §7: nothing
// public says whether the API counts its limits per API key or per
// account. The client paces per key. Two users of one account, each with
// a key and a client of PlanAuto of their own (two MCP servers), read 15
// cards each, three at a time, with ReadCardWithRetry's defaults, against
// 30 requests a minute:
//
//   - counted per key, each key's pace is the API's: no refusal, and the
//     46 requests of each key (the limits' read and 45) take 32s;
//   - counted per account, the two paces together ask twice what the
//     account has, and each key meets refusals the other caused. The
//     retries, the pace the transport learns from the refusals and each
//     key's breaker keep the clients polite: the account gets at most
//     1.85 times the requests it serves (in 1,000 runs, 1.58 at worst),
//     the batch takes at least the 124s the account's limit allows for
//     92 requests and never ten minutes (2 to 6.5 minutes in those runs),
//     and every card is read but at most one: now and then (2 runs in
//     1,000) the other key spends every token a call's 10 attempts could
//     have had, and that call fails, or its card comes without a part:
//     pacing per key cannot prevent that.
func TestPerKeyPaceUnderAnAccountWideLimit(t *testing.T) {
	const otherKey = "second-user-key-93"
	for _, tt := range []struct {
		name       string
		perAccount bool
	}{
		{name: "limits per key", perAccount: false},
		{name: "limits per account", perAccount: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, APIKeys: []string{otherKey},
					PerAccount: tt.perAccount, PerMinute: 30, PerHour: 600})
				var mu sync.Mutex
				complete, partial, failed := 0, 0, 0
				var wg sync.WaitGroup
				start := time.Now()
				for _, key := range []string{secretKey, otherKey} {
					c, err := kanbanize.NewClient("acme", key, kanbanize.WithPlan(kanbanize.PlanAuto),
						kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
					if err != nil {
						t.Fatal(err)
					}
					for w := range 3 {
						wg.Go(func() {
							for i := range 5 {
								env, err := c.ReadCardWithRetry(context.Background(), kanbanize.ID(100+5*w+i).String(), kanbanize.RetryOptions{})
								mu.Lock()
								switch {
								case err != nil:
									failed++
								case env.PartialError != nil:
									partial++
								default:
									complete++
								}
								mu.Unlock()
							}
						})
					}
				}
				wg.Wait()
				took, st := time.Since(start), fake.Stats()
				served := st.Requests - st.Limited
				t.Logf("%v: %d requests, %d refused; %d cards complete, %d partial", took, st.Requests, st.Limited, complete, partial)
				if !tt.perAccount {
					if took != 32*time.Second || st.Limited != 0 || st.Requests != 92 || complete != 30 {
						t.Errorf("took %v, %d requests, %d refused, %d complete; want 32s, 92, none refused, 30",
							took, st.Requests, st.Limited, complete)
					}
					return
				}
				if st.Limited == 0 {
					t.Error("no refusal: the keys' paces together ask twice the account's limit")
				}
				if failed+partial > 1 {
					t.Errorf("%d cards failed and %d partial, want every card read but one at most", failed, partial)
				}
				if st.Requests > served*185/100 {
					t.Errorf("%d requests for %d served, want at most 1.85 times", st.Requests, served)
				}
				if least := time.Duration(served-30) * 2 * time.Second; took < least || took > 10*time.Minute {
					t.Errorf("took %v, want at least the %v the account's limit allows and less than ten minutes", took, least)
				}
			})
		})
	}
}
