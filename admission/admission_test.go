package admission

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise"
)

// fields are the rate-limit headers of an answer, as one line.
func fields(rec *httptest.ResponseRecorder) string {
	h := rec.Header()
	return fmt.Sprintf("%d policy=%s rl=%s x=%s/%s/%s retry=%s", rec.Code, h.Get("RateLimit-Policy"), h.Get("RateLimit"),
		h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), h.Get("Retry-After"))
}

// adr-009, criterion "answers clients can act on": each success carries
// what is left after it and when the quota is whole again, in the IETF
// fields and the X-RateLimit ones of the binding scope; the refusal is a
// 429 with Retry-After, the same fields and a problem document naming
// the scope and the wait.
func TestADRScopesAnswerWithExactQuotaFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(adrPerIP()), WithLimit(adrGlobal()))
		const policy = `"ip";q=5;w=30, "global";q=20;w=12`
		want := []string{
			`200 policy=` + policy + ` rl="ip";r=4;t=6, "global";r=19;t=1 x=5/4/6 retry=`,
			`200 policy=` + policy + ` rl="ip";r=3;t=12, "global";r=18;t=2 x=5/3/12 retry=`,
			`200 policy=` + policy + ` rl="ip";r=2;t=18, "global";r=17;t=2 x=5/2/18 retry=`,
			`200 policy=` + policy + ` rl="ip";r=1;t=24, "global";r=16;t=3 x=5/1/24 retry=`,
			`200 policy=` + policy + ` rl="ip";r=0;t=30, "global";r=15;t=3 x=5/0/30 retry=`,
			`429 policy=` + policy + ` rl="ip";r=0;t=30, "global";r=15;t=3 x=5/0/30 retry=6`,
		}
		for i, w := range want {
			if got := fields(serve(h, "192.0.2.1:1234", "/items")); got != w {
				t.Errorf("request %d:\n got %s\nwant %s", i+1, got, w)
			}
		}
		rec := serve(h, "192.0.2.1:1234", "/items")
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("Content-Type of the refusal = %q", ct)
		}
		const body = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,` +
			`"detail":"The request exceeds the rate limit; retry in 6 s.","violated-policies":["ip"],"retry-after":6}` + "\n"
		if rec.Body.String() != body {
			t.Errorf("refusal body:\n got %s\nwant %s", rec.Body, body)
		}
		// Retry-After is exact: 6 s later the request passes, not before.
		time.Sleep(6*time.Second - time.Nanosecond)
		if rec := serve(h, "192.0.2.1:1234", "/items"); rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("a nanosecond early: %s; want 429 with Retry-After 1", fields(rec))
		}
		time.Sleep(time.Nanosecond)
		if rec := serve(h, "192.0.2.1:1234", "/items"); rec.Code != 200 {
			t.Errorf("at the Retry-After: %s; want 200", fields(rec))
		}
		// Another client has its own bucket, and shares the global one.
		if got, want := fields(serve(h, "192.0.2.2:1", "/items")), `200 policy=`+policy+` rl="ip";r=4;t=6, "global";r=18;t=2 x=5/4/6 retry=`; got != want {
			t.Errorf("another client:\n got %s\nwant %s", got, want)
		}
	})
}

// adr-009, "stacked scopes, each checked in order, a request passing only
// when every scope admits it, taking nothing from a scope when a later
// one refuses": the global scope refuses, and the client's own bucket
// keeps the token it took.
func TestLaterScopeRefusingTakesNothingFromEarlierOnes(t *testing.T) {
	for _, shared := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ip, global := adrPerIP(), Limit{Name: "global", Rate: perMinute(1), Burst: 2, Key: ratewise.Global}
			if shared {
				store := ratewise.NewMemoryStore()
				ip.Store, global.Store = store, store
			}
			h := newHandler(t, WithLimit(ip), WithLimit(global))
			for i := range 2 {
				if rec := serve(h, "192.0.2.1:1", "/"); rec.Code != 200 {
					t.Fatalf("shared %v: request %d: %s", shared, i+1, fields(rec))
				}
			}
			rec := serve(h, "192.0.2.1:1", "/")
			if got, want := fields(rec), `429 policy="ip";q=5;w=30, "global";q=2;w=120 rl="ip";r=3;t=12, "global";r=0;t=120 x=2/0/120 retry=60`; got != want {
				t.Errorf("shared %v: refused by the global scope:\n got %s\nwant %s", shared, got, want)
			}
			if !strings.Contains(rec.Body.String(), `"violated-policies":["global"]`) {
				t.Errorf("shared %v: body %s; want the global scope named", shared, rec.Body)
			}
			st := h.Status(context.Background(), "192.0.2.1")
			if got := st.Scopes[0]; got.Tokens != 3 || got.Remaining != 3 {
				t.Errorf("shared %v: the client's bucket after the refusal = %+v; want the 3 tokens it had, none taken", shared, got)
			}
			if got := h.Status(context.Background(), "192.0.2.9").Scopes[0]; got.Tokens != 5 {
				t.Errorf("shared %v: a client never seen = %+v; want a full bucket", shared, got)
			}
		})
	}
}

// serveAt serves a GET from remote in its own goroutine and reports when
// it was answered and how.
type answer struct {
	code int
	at   time.Duration
	rec  *httptest.ResponseRecorder
}

func serveAsync(h http.Handler, ctx context.Context, remote string, start time.Time, out *answer, wg *sync.WaitGroup) {
	wg.Go(func() {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		*out = answer{rec.Code, time.Since(start), rec}
	})
}

// adr-009, "Allow / Queue / Reject, 50 pending": a scope with a MaxWait
// makes each request wait exactly for its turn, and keeps at most
// MaxQueue of a key waiting: the next is refused, told when its turn
// would have come.
func TestQueueWaitsForTurnsWithinMaxQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "q", Rate: 1, Burst: 1, MaxWait: 10 * time.Second, MaxQueue: 2}))
		start := time.Now()
		var wg sync.WaitGroup
		got := make([]answer, 5)
		for i := range got {
			serveAsync(h, context.Background(), "192.0.2.1:1", start, &got[i], &wg)
			synctest.Wait() // in order: each has taken its turn before the next comes
		}
		wg.Wait()
		want := []struct {
			code  int
			at    time.Duration
			retry string
		}{
			{200, 0, ""},
			{200, time.Second, ""},
			{200, 2 * time.Second, ""},
			{429, 0, "3"}, // two wait already
			{429, 0, "3"},
		}
		for i, w := range want {
			if got[i].code != w.code || got[i].at != w.at || got[i].rec.Header().Get("Retry-After") != w.retry {
				t.Errorf("request %d: %d after %v, Retry-After %q; want %d after %v, %q", i+1, got[i].code, got[i].at,
					got[i].rec.Header().Get("Retry-After"), w.code, w.at, w.retry)
			}
		}
		st := h.Stats().Scopes[0]
		if st.Admitted != 3 || st.Queued != 2 || st.Refused[ReasonMaxQueue] != 2 || st.QueueDepth != 0 || st.Waits.Count != 2 || st.Waits.Total != 3*time.Second {
			t.Errorf("stats = %+v; want 3 admitted, 2 queued (3 s in all), 2 refused for max-queue, none waiting", st)
		}
		if rec := serve(h, "192.0.2.2:1", "/"); rec.Code != 200 {
			t.Errorf("another key, whose queue is its own: %s", fields(rec))
		}
	})
}

// A request whose turn would come after MaxWait is refused at once,
// told when it would have come.
func TestQueueRefusesAWaitPastMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "q", Rate: 1, Burst: 1, MaxWait: 1500 * time.Millisecond}))
		start := time.Now()
		var wg sync.WaitGroup
		got := make([]answer, 3)
		for i := range got {
			serveAsync(h, context.Background(), "192.0.2.1:1", start, &got[i], &wg)
			synctest.Wait()
		}
		wg.Wait()
		for i, w := range []struct {
			code  int
			at    time.Duration
			retry string
		}{{200, 0, ""}, {200, time.Second, ""}, {429, 0, "2"}} {
			if got[i].code != w.code || got[i].at != w.at || got[i].rec.Header().Get("Retry-After") != w.retry {
				t.Errorf("request %d: %d after %v, Retry-After %q; want %d after %v, %q", i+1, got[i].code, got[i].at,
					got[i].rec.Header().Get("Retry-After"), w.code, w.at, w.retry)
			}
		}
		if n := h.Stats().Scopes[0].Refused[ReasonMaxWait]; n != 1 {
			t.Errorf("refused for max-wait: %d, want 1", n)
		}
	})
}

// adr-009, "requests whose context ends while queued leave the queue": a
// waiter whose client goes away is answered 503 at once, and its turn is
// the next request's.
func TestQueuedRequestLeavesWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "q", Rate: 1, Burst: 1, Key: ratewise.Global, MaxWait: 10 * time.Second}))
		start := time.Now()
		var wg sync.WaitGroup
		var first, gone, next answer
		serveAsync(h, context.Background(), "192.0.2.1:1", start, &first, &wg)
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		serveAsync(h, ctx, "192.0.2.2:1", start, &gone, &wg)
		synctest.Wait()
		if d := h.Stats().Scopes[0].QueueDepth; d != 1 {
			t.Fatalf("queue depth = %d, want the one waiting", d)
		}
		time.Sleep(400 * time.Millisecond)
		cancel()
		synctest.Wait()
		if gone.code != 503 || gone.at != 400*time.Millisecond {
			t.Errorf("the cancelled waiter: %d after %v; want 503 at once, after 400ms", gone.code, gone.at)
		}
		serveAsync(h, context.Background(), "192.0.2.3:1", start, &next, &wg)
		wg.Wait()
		if next.code != 200 || next.at != time.Second {
			t.Errorf("the next request: %d after %v; want the turn the cancelled one left, at 1s", next.code, next.at)
		}
		st := h.Stats().Scopes[0]
		if st.Refused[ReasonCanceled] != 1 || st.QueueDepth != 0 {
			t.Errorf("stats = %+v; want one cancelled, none waiting", st)
		}
	})
}

// A wait that would outlive the request's own deadline is refused at
// once rather than started.
func TestQueueRefusesAWaitPastTheRequestsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "q", Rate: 1, Burst: 1, MaxWait: time.Minute}))
		serve(h, "192.0.2.1:1", "/")
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		req.RemoteAddr = "192.0.2.1:1"
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		if rec.Code != 429 || time.Since(start) != 0 || rec.Header().Get("Retry-After") != "1" {
			t.Errorf("a wait of 1s with 500ms left: %s after %v; want 429 at once", fields(rec), time.Since(start))
		}
		if rec := serve(h, "192.0.2.1:1", "/"); rec.Code != 200 {
			// Without a deadline it queues, and takes the turn the
			// refused one did not.
			t.Errorf("without a deadline: %s", fields(rec))
		}
	})
}

// A window scope admits Burst a Window from a key's first request, says
// what is left of the window and when it ends, and starts anew after.
func TestWindowScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "min", Burst: 3, Window: time.Minute}))
		const policy = `"min";q=3;w=60`
		var got []string
		for range 3 {
			got = append(got, fields(serve(h, "192.0.2.1:1", "/")))
			time.Sleep(10 * time.Second)
		}
		got = append(got, fields(serve(h, "192.0.2.1:1", "/")))
		time.Sleep(30 * time.Second)
		got = append(got, fields(serve(h, "192.0.2.1:1", "/")))
		want := []string{
			`200 policy=` + policy + ` rl="min";r=2;t=60 x=3/2/60 retry=`,
			`200 policy=` + policy + ` rl="min";r=1;t=50 x=3/1/50 retry=`,
			`200 policy=` + policy + ` rl="min";r=0;t=40 x=3/0/40 retry=`,
			`429 policy=` + policy + ` rl="min";r=0;t=30 x=3/0/30 retry=30`,
			`200 policy=` + policy + ` rl="min";r=2;t=60 x=3/2/60 retry=`,
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("request %d:\n got %s\nwant %s", i+1, got[i], want[i])
			}
		}
	})
}

// adr-009, "paths can be exempted (health checks)": they pass unlimited
// and uncounted, and carry no quota fields.
func TestExemptPathsPassUncounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "ip", Rate: perMinute(1), Burst: 1}),
			WithExemptPaths("/health", "/debug/"), WithExempt(func(r *http.Request) bool { return r.Method == http.MethodOptions }))
		for range 3 {
			for _, path := range []string{"/health", "/debug/vars"} {
				if rec := serve(h, "192.0.2.1:1", path); rec.Code != 200 || rec.Header().Get("RateLimit") != "" {
					t.Errorf("%s: %s; want 200 without quota fields", path, fields(rec))
				}
			}
		}
		req := httptest.NewRequest(http.MethodOptions, "http://api.test/items", nil)
		req.RemoteAddr = "192.0.2.1:1"
		h.ServeHTTP(httptest.NewRecorder(), req)
		if rec := serve(h, "192.0.2.1:1", "/healthz"); rec.Code != 200 {
			t.Errorf("/healthz, not exempt, first: %s; want the bucket's one token", fields(rec))
		}
		if rec := serve(h, "192.0.2.1:1", "/health/live"); rec.Code != 429 {
			t.Errorf("/health/live, not exempt (/health is exact): %s; want 429", fields(rec))
		}
		if st := h.Stats(); st.Requests != 9 || st.Exempt != 7 || st.Admitted != 1 || st.Refused != 1 {
			t.Errorf("stats = %+v; want 9 requests, 7 exempt, 1 admitted, 1 refused", st)
		}
	})
}

// A scope limits only the requests it Applies to; the others neither pass
// through it nor are told of it.
func TestScopeAppliesToSomeRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		writes := Limit{Name: "writes", Rate: perMinute(1), Burst: 1, Key: ratewise.Global,
			Applies: func(r *http.Request) bool { return r.Method != http.MethodGet }}
		h := newHandler(t, WithLimit(adrPerIP()), WithLimit(writes))
		if got, want := fields(serve(h, "192.0.2.1:1", "/")), `200 policy="ip";q=5;w=30 rl="ip";r=4;t=6 x=5/4/6 retry=`; got != want {
			t.Errorf("a GET:\n got %s\nwant %s", got, want)
		}
		for i, wantCode := range []int{200, 429} {
			req := httptest.NewRequest(http.MethodPost, "http://api.test/", nil)
			req.RemoteAddr = "192.0.2.1:1"
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != wantCode {
				t.Errorf("POST %d: %s; want %d", i+1, fields(rec), wantCode)
			}
		}
	})
}

// Which fields are sent is configurable; the status and the problem
// document stay.
func TestHeadersAreConfigurable(t *testing.T) {
	tests := []struct {
		give     Headers
		ok, gone string
	}{
		{HeaderXRateLimit, `200 policy= rl= x=1/0/60 retry=`, `429 policy= rl= x=1/0/60 retry=`},
		{HeaderRateLimit | HeaderRetryAfter, `200 policy="ip";q=1;w=60 rl="ip";r=0;t=60 x=// retry=`,
			`429 policy="ip";q=1;w=60 rl="ip";r=0;t=60 x=// retry=60`},
		{DefaultHeaders | HeaderRefusalsOnly, `200 policy= rl= x=// retry=`, `429 policy="ip";q=1;w=60 rl="ip";r=0;t=60 x=1/0/60 retry=60`},
		{0, `200 policy= rl= x=// retry=`, `429 policy= rl= x=// retry=`},
	}
	for _, tt := range tests {
		synctest.Test(t, func(t *testing.T) {
			h := newHandler(t, WithLimit(Limit{Name: "ip", Rate: perMinute(1), Burst: 1}), WithHeaders(tt.give))
			if got := fields(serve(h, "192.0.2.1:1", "/")); got != tt.ok {
				t.Errorf("headers %b, admitted:\n got %s\nwant %s", tt.give, got, tt.ok)
			}
			rec := serve(h, "192.0.2.1:1", "/")
			if got := fields(rec); got != tt.gone {
				t.Errorf("headers %b, refused:\n got %s\nwant %s", tt.give, got, tt.gone)
			}
			if !strings.Contains(rec.Body.String(), `"retry-after":60`) {
				t.Errorf("headers %b: the problem document %s lost its wait", tt.give, rec.Body)
			}
		})
	}
}

// adr-009, "seen": the hooks hear, per scope, each request admitted,
// queued and refused, with its key and wait; Stats counts them.
func TestHooksAndStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		record := func(kind string) func(Event) {
			return func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, fmt.Sprintf("%s %s %q %v %s", kind, e.Scope, e.Key, e.Wait, e.Reason))
			}
		}
		h := newHandler(t,
			WithLimit(Limit{Name: "ip", Rate: 1, Burst: 1}),
			WithLimit(Limit{Name: "global", Rate: 0.5, Burst: 1, Key: ratewise.Global, MaxWait: 5 * time.Second}),
			WithHooks(Hooks{Admitted: record("admitted"), Queued: record("queued"), Refused: record("refused")}))
		serve(h, "192.0.2.1:1", "/")
		serve(h, "192.0.2.1:1", "/")
		serve(h, "192.0.2.2:1", "/")
		want := []string{
			`admitted ip "192.0.2.1" 0s `,
			`admitted global "" 0s `,
			`refused ip "192.0.2.1" 1s limit`,
			`queued global "" 2s `,
			`admitted ip "192.0.2.2" 0s `,
			`admitted global "" 2s `,
		}
		if strings.Join(events, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
		}
		st := h.Stats()
		if st.Requests != 3 || st.Admitted != 2 || st.Refused != 1 {
			t.Errorf("stats = %+v", st)
		}
		if ip := st.Scopes[0]; ip.Admitted != 2 || ip.Refused[ReasonLimit] != 1 || ip.Queued != 0 {
			t.Errorf("ip scope stats = %+v", ip)
		}
		if g := st.Scopes[1]; g.Admitted != 2 || g.Queued != 1 || g.Waits.Count != 1 || g.Waits.Total != 2*time.Second ||
			g.Waits.Buckets[len(g.Waits.Buckets)-1] != 1 || g.Waits.Buckets[3] != 0 || g.Waits.Buckets[4] != 1 {
			t.Errorf("global scope stats = %+v; want the 2s wait in the 2.5s bucket", g)
		}
	})
}

// adr-009's get_status: a key's tokens in each scope, what the headers
// would say, and the time until it is whole again.
func TestStatusReportsAKeysTokensPerScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(adrPerIP()), WithLimit(adrGlobal()),
			WithLimit(Limit{Name: "hour", Burst: 600, Window: time.Hour, Key: ratewise.ByHeader("X-Api-Key")}))
		serve(h, "192.0.2.1:1", "/")
		time.Sleep(3 * time.Second)
		st := h.Status(context.Background(), "192.0.2.1")
		if len(st.Scopes) != 3 {
			t.Fatalf("%d scopes, want 3", len(st.Scopes))
		}
		ip, global, hour := st.Scopes[0], st.Scopes[1], st.Scopes[2]
		if ip.Name != "ip" || ip.Key != "192.0.2.1" || ip.Tokens != 4.5 || ip.Remaining != 4 || ip.Burst != 5 ||
			ip.Rate != 1.0/6 || ip.ResetIn != 3*time.Second {
			t.Errorf("ip = %+v; want 4.5 tokens, whole in 3s", ip)
		}
		if global.Key != "" || global.Tokens != 20 || global.ResetIn != 0 {
			t.Errorf("global = %+v; want full", global)
		}
		if hour.Tokens != 600 || hour.Window != time.Hour || hour.ResetIn != time.Hour {
			t.Errorf("hour = %+v; want a window not started", hour)
		}
	})
}
