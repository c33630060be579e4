package kanbanize_test

import (
	"context"
	"errors"
	"io"
	"net/http"
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

// scopeNames lists the names of the transport's limit scopes.
func scopeNames(rw *ratewise.Transport) []string {
	var names []string
	for _, l := range rw.Limits() {
		names = append(names, l.Name)
	}
	return names
}

// autoScope returns the scope of PlanAuto named "kanbanize auto apikey:…
// <window>" on rw, and whether there is one.
func autoScope(rw *ratewise.Transport, window string) (ratewise.Limit, bool) {
	for _, l := range rw.Limits() {
		if strings.HasPrefix(l.Name, "kanbanize auto apikey:") && strings.HasSuffix(l.Name, " "+window) {
			return l, true
		}
	}
	return ratewise.Limit{}, false
}

// limitsReads counts the requests for the account's limits the fake got.
func limitsReads(fake *kanbanizetest.Server) int {
	return fake.Stats().ByEndpoint[kanbanizetest.EndpointAPILimits]
}

// kanbanize-rate-limit-plan.md §1 (stay under the published limits,
// without a 429): with PlanAuto the client reads the account's limits
// once, at its first call, while the calls beside it wait for the read,
// then paces under them to the letter. The read is a request the API
// counts, and so does the pace: 45 card requests and the read are 46
// requests, 30 at once and 16 more one every 2s.
func TestAutoPlanReadsTheLimitsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 30, PerHour: 600}, kanbanize.WithPlan(kanbanize.PlanAuto),
			kanbanize.WithLogger(logs.logger()))
		if l, ok := c.Limits(); ok {
			t.Errorf("Limits() before any call = %+v, true; want none yet", l)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for w := range 5 {
			wg.Go(func() {
				for i := range 3 {
					if _, err := c.ReadCard(context.Background(), kanbanize.ID(100+3*w+i).String()); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if got := time.Since(start); got != 32*time.Second {
			t.Errorf("15 cards took %v, want 32s", got)
		}
		if st := fake.Stats(); st.Limited != 0 || st.Requests != 46 || limitsReads(fake) != 1 {
			t.Errorf("server stats = %+v, want 46 requests, one of them for the limits, and no refusal", st)
		}
		if l, ok := c.Limits(); !ok || l != (kanbanize.Limits{PerMinute: 30, PerHour: 600}) {
			t.Errorf("Limits() = %+v, %v; want 30 a minute and 600 an hour", l, ok)
		}
		minute, okM := autoScope(c.Transport(), "per minute")
		hour, okH := autoScope(c.Transport(), "per hour")
		if !okM || !okH || minute.Burst != 30 || hour.Burst != 600 {
			t.Errorf("scopes %q, want the key's per minute (30) and per hour (600)", scopeNames(c.Transport()))
		}
		if strings.Contains(strings.Join(scopeNames(c.Transport()), ","), secretKey) {
			t.Errorf("a scope's name holds the API key: %q", scopeNames(c.Transport()))
		}
		want := `level=INFO msg="pacing under the account's API limits" event=api_limits outcome=read per_minute=30 per_hour=600`
		if got := logs.matching("event=api_limits"); len(got) != 1 || got[0] != want {
			t.Errorf("api_limits lines = %q, want\n%s", got, want)
		}
	})
}

// kanbanize-rate-limit-plan.md §1: a custom plan, whose numbers no
// published plan has, is paced by exactly its numbers: 40 a minute is a
// burst of 40, then one every 1.5s.
func TestCustomPlanPacesByItsNumbers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, err := kanbanize.ParsePlan("40/700")
		if err != nil || p != kanbanize.CustomPlan(40, 700) {
			t.Fatalf("ParsePlan(40/700) = %q, %v; want CustomPlan(40, 700)", p, err)
		}
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 40, PerHour: 700}, kanbanize.WithPlan(p))
		if l, ok := c.Limits(); !ok || l != (kanbanize.Limits{PerMinute: 40, PerHour: 700}) {
			t.Errorf("Limits() = %+v, %v; want 40 and 700", l, ok)
		}
		start := time.Now()
		for id := 100; id < 115; id++ { // 45 requests
			if _, err := c.ReadCard(context.Background(), kanbanize.ID(id).String()); err != nil {
				t.Fatal(err)
			}
		}
		if got := time.Since(start); got != 7500*time.Millisecond {
			t.Errorf("45 requests took %v, want 7.5s: 40 at once, then 5 one every 1.5s", got)
		}
		if st := fake.Stats(); st.Limited != 0 || limitsReads(fake) != 0 {
			t.Errorf("server stats = %+v, want no refusal and no read of the limits", st)
		}
		if names := strings.Join(scopeNames(c.Transport()), ","); names != "kanbanize 40/700 per minute,kanbanize 40/700 per hour,"+ratewise.LearnedScope {
			t.Errorf("scopes = %s, want the custom plan's two, then the learned scope under them", names)
		}
	})
}

// limitsAnswer answers the requests for the account's limits itself,
// and sends the others to next.
type limitsAnswer struct {
	next   http.RoundTripper
	status int
	reads  *atomic.Int32
}

func (t limitsAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/apiLimits") {
		return t.next.RoundTrip(req)
	}
	t.reads.Add(1)
	body := `{"error":{"code":"AC01","message":"Forbidden.","reference":"0"}}`
	return &http.Response{StatusCode: t.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// kanbanize-rate-limit-plan.md §4 and §10: when the limits endpoint
// cannot tell the limits, the client paces under none of its own and the
// transport learns them from the refusals, as with no plan. After a 404,
// a 403 or an answer it cannot read it never asks again; after a network
// error, a 503 or an empty list it asks again when a call is refused, at
// most once every LimitsRereadInterval.
func TestAutoPlanFallsBackToLearning(t *testing.T) {
	limited := kanbanizetest.Config{PerMinute: 30, PerHour: 600}
	tests := []struct {
		name      string
		cfg       kanbanizetest.Config
		status    int // when set, the limits endpoint answers it
		script    []kanbanizetest.Fault
		wantAgain bool
		wantTold  bool // after the second read
	}{
		{name: "404", cfg: limited, status: http.StatusNotFound},
		{name: "403", cfg: limited, status: http.StatusForbidden},
		{name: "malformed", cfg: limited, script: []kanbanizetest.Fault{kanbanizetest.FaultMalformedJSON}},
		{name: "network error", cfg: limited, script: repeat(kanbanizetest.FaultReset, 3), wantAgain: true, wantTold: true},
		{name: "503", cfg: limited, script: repeat(kanbanizetest.Fault503, 3), wantAgain: true, wantTold: true},
		{name: "no limits told", wantAgain: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.cfg
				cfg.APIKey = secretKey
				// The card's second read is refused: a refusal that no
				// pace explains.
				cfg.Scripts = map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
					kanbanizetest.EndpointAPILimits: tt.script,
					kanbanizetest.EndpointCard:      {kanbanizetest.FaultNone, kanbanizetest.Fault429},
				}
				fake := kanbanizetest.New(cfg)
				var answered atomic.Int32
				var rt http.RoundTripper = fake.Transport()
				if tt.status != 0 {
					rt = limitsAnswer{next: rt, status: tt.status, reads: &answered}
				}
				var logs logBuffer
				c, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: rt}),
					kanbanize.WithPlan(kanbanize.PlanAuto), kanbanize.WithLogger(logs.logger()))
				if err != nil {
					t.Fatal(err)
				}
				reads := func() int { return limitsReads(fake) + int(answered.Load()) }

				if _, err := c.ReadCard(context.Background(), "100"); err != nil {
					t.Fatal(err)
				}
				if reads() == 0 {
					t.Fatal("the limits were not asked for")
				}
				if l, ok := c.Limits(); ok {
					t.Errorf("Limits() = %+v, true; want none told", l)
				}
				if names := strings.Join(scopeNames(c.Transport()), ","); names != ratewise.LearnedScope {
					t.Errorf("scopes = %s, want the transport's learning alone", names)
				}
				if got := logs.matching("level=WARN", "event=api_limits outcome=unavailable", "error="); len(got) != 1 || strings.Contains(got[0], secretKey) {
					t.Errorf("api_limits lines = %q, want one saying why, without the key", logs.lines())
				}
				if _, err := c.ReadCard(context.Background(), "101"); !errors.Is(err, kanbanize.ErrRateLimited) {
					t.Fatalf("the refused read: %v, want ErrRateLimited", err)
				}
				before := reads()
				time.Sleep(kanbanize.LimitsRereadInterval)
				if _, err := c.ReadCard(context.Background(), "102"); err != nil {
					t.Fatal(err)
				}
				if again := reads() > before; again != tt.wantAgain {
					t.Errorf("asked again after a refusal and %v: %v, want %v", kanbanize.LimitsRereadInterval, again, tt.wantAgain)
				}
				if _, told := c.Limits(); told != tt.wantTold {
					t.Errorf("Limits() told %v after that, want %v", told, tt.wantTold)
				}
			})
		})
	}
}

// kanbanize-rate-limit-plan.md §7 (slow down when refusals persist) and
// §1: the account's plan changes while the client runs (60 a minute to
// 30): the client, paced under the limits it read, meets a refusal its
// pace does not explain; the first call LimitsRereadInterval after the
// read reads them again, and the client paces under the new ones,
// without another refusal.
func TestAutoPlanTakesUpAChangedLimitAtTheReread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		// A millisecond of latency, as a network has: the client's pace
		// and the fake's buckets then never meet at the very instant a
		// token comes, where their float sums may round apart.
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 60, PerHour: 900, Latency: time.Millisecond},
			kanbanize.WithPlan(kanbanize.PlanAuto), kanbanize.WithLogger(logs.logger()))
		if _, err := c.ReadCard(context.Background(), "100"); err != nil {
			t.Fatal(err)
		}
		fake.SetLimits(30, 600) // the account moves to a smaller plan
		refused := 0
		for id := 101; id < 112; id++ { // 33 requests: the fake kept 30 of its 56 tokens
			if _, err := c.ReadCard(context.Background(), kanbanize.ID(id).String()); errors.Is(err, kanbanize.ErrRateLimited) {
				refused++
			}
		}
		if refused == 0 || limitsReads(fake) != 1 {
			t.Fatalf("%d reads refused, %d reads of the limits; want refusals under the old pace, and one read", refused, limitsReads(fake))
		}
		// Within the interval, refusals do not make the client ask again.
		time.Sleep(kanbanize.LimitsRereadInterval - time.Minute)
		if _, err := c.ReadCard(context.Background(), "112"); err != nil {
			t.Fatal(err)
		}
		if n := limitsReads(fake); n != 1 {
			t.Fatalf("%d reads of the limits within %v of the first, want 1", n, kanbanize.LimitsRereadInterval)
		}
		time.Sleep(time.Minute)
		if _, err := c.ReadCard(context.Background(), "113"); err != nil {
			t.Fatal(err)
		}
		if l, ok := c.Limits(); !ok || l != (kanbanize.Limits{PerMinute: 30, PerHour: 600}) || limitsReads(fake) != 2 {
			t.Fatalf("Limits() = %+v, %v after %d reads; want the new 30 and 600 after 2", l, ok, limitsReads(fake))
		}
		if minute, _ := autoScope(c.Transport(), "per minute"); minute.Burst != 30 {
			t.Errorf("the per-minute scope's Burst = %d, want 30", minute.Burst)
		}
		limited, start := fake.Stats().Limited, time.Now()
		for id := 114; id < 134; id++ { // 60 requests: twice the new quota
			if _, err := c.ReadCard(context.Background(), kanbanize.ID(id).String()); err != nil {
				t.Fatal(err)
			}
		}
		if n := fake.Stats().Limited - limited; n != 0 {
			t.Errorf("%d refusals under the new pace, want none", n)
		}
		// 26 tokens left of the new 30 (the read and a card spent 4): 26
		// at once, then 34 one every 2s: about 68s (the latencies and the
		// pace learned from the refusal let a fraction of a token in
		// meanwhile), where the old pace would have taken 34s.
		if took := time.Since(start); took < 67*time.Second || took > 69*time.Second {
			t.Errorf("60 requests under the new pace took %v, want about 68s", took)
		}
		want := `level=INFO msg="the account's API limits changed" event=api_limits outcome=changed per_minute=30 per_hour=600`
		if got := logs.matching("outcome=changed"); len(got) != 1 || got[0] != want {
			t.Errorf("log lines of the change = %q, want\n%s", got, want)
		}
	})
}

// A limit raised on the account causes no refusal to say so: the first
// call LimitsRereadInterval after the last read reads the limits again,
// and the client paces under the raise. Within the interval, nothing is
// read again.
func TestAutoPlanNoticesARaisedLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs logBuffer
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 30, PerHour: 600, Latency: time.Millisecond},
			kanbanize.WithPlan(kanbanize.PlanAuto), kanbanize.WithLogger(logs.logger()))
		if _, err := c.ReadCard(context.Background(), "100"); err != nil {
			t.Fatal(err)
		}
		fake.SetLimits(60, 900) // the account moves to a larger plan
		time.Sleep(kanbanize.LimitsRereadInterval - time.Second)
		if _, err := c.ReadCard(context.Background(), "101"); err != nil {
			t.Fatal(err)
		}
		if n := limitsReads(fake); n != 1 {
			t.Fatalf("%d reads of the limits within %v of the first, want 1", n, kanbanize.LimitsRereadInterval)
		}
		time.Sleep(time.Second)
		if _, err := c.ReadCard(context.Background(), "102"); err != nil {
			t.Fatal(err)
		}
		if l, ok := c.Limits(); !ok || l != (kanbanize.Limits{PerMinute: 60, PerHour: 900}) || limitsReads(fake) != 2 {
			t.Fatalf("Limits() = %+v, %v after %d reads; want the raised 60 and 900 after 2", l, ok, limitsReads(fake))
		}
		if minute, _ := autoScope(c.Transport(), "per minute"); minute.Burst != 60 {
			t.Errorf("the per-minute scope's Burst = %d, want 60", minute.Burst)
		}
		want := `level=INFO msg="the account's API limits changed" event=api_limits outcome=changed per_minute=60 per_hour=900`
		if got := logs.matching("outcome=changed"); len(got) != 1 || got[0] != want {
			t.Errorf("log lines of the change = %q, want\n%s", got, want)
		}
	})
}

// kanbanize-rate-limit-plan.md §1: clients sharing a transport read the
// limits once per key: a second client of the key takes the scopes the
// first one added, and a client of another key reads its own.
func TestAutoPlanReadsOncePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const otherKey = "other-user-key-21"
		fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, APIKeys: []string{otherKey}, PerMinute: 30, PerHour: 600})
		shared := &http.Client{Transport: ratewise.New(fake.Transport())}
		var clients []*kanbanize.Client
		for _, key := range []string{secretKey, secretKey, otherKey} {
			c, err := kanbanize.NewClient("acme", key, kanbanize.WithHTTPClient(shared), kanbanize.WithPlan(kanbanize.PlanAuto))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ReadCard(context.Background(), "100"); err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		if n := limitsReads(fake); n != 2 {
			t.Errorf("%d reads of the limits, want 2: one per key", n)
		}
		for i, c := range clients {
			if l, ok := c.Limits(); !ok || l.PerMinute != 30 {
				t.Errorf("client %d: Limits() = %+v, %v; want 30 a minute", i, l, ok)
			}
		}
		if n := len(shared.Transport.(*ratewise.Transport).Limits()); n != 5 {
			t.Errorf("scopes %q, want the learned one and two per key", scopeNames(shared.Transport.(*ratewise.Transport)))
		}
	})
}

// PlanAuto's read ends with its caller: a read given up leaves the
// limits unread, and the next call reads them.
func TestAutoPlanReadGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 30, PerHour: 600, Latency: time.Second}, kanbanize.WithPlan(kanbanize.PlanAuto))
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if _, err := c.ReadCard(ctx, "100"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ReadCard cut short during the read = %v, want DeadlineExceeded", err)
		}
		if _, ok := c.Limits(); ok {
			t.Error("limits told by a read given up")
		}
		if _, err := c.ReadCard(context.Background(), "100"); err != nil {
			t.Fatal(err)
		}
		if l, ok := c.Limits(); !ok || l.PerMinute != 30 || limitsReads(fake) != 2 {
			t.Errorf("Limits() = %+v, %v after %d reads; want 30 a minute after the second read", l, ok, limitsReads(fake))
		}
	})
}
