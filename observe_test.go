package ratewise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a Trace that writes every event as a line.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) trace(prefix string) *Trace {
	return &Trace{
		AttemptStarted: func(a AttemptInfo) {
			r.add("%sattempt %d/%d %s %s %s", prefix, a.Attempt, a.MaxAttempts, a.Method, a.Key, a.Endpoint)
		},
		ResponseClassified: func(x ResponseInfo) {
			r.add("%sresponse %d: %d %s hint %v err %v", prefix, x.Attempt, x.StatusCode, x.Class, x.Hint, x.Err)
		},
		RetryScheduled: func(x RetryInfo) {
			r.add("%sretry %d/%d after %s in %v", prefix, x.Attempt, x.MaxAttempts, x.Reason, x.Delay)
		},
		WaitStarted: func(w WaitInfo) { r.add("%swait %s %v before %d", prefix, w.Kind, w.Delay, w.Attempt) },
		WaitEnded: func(w WaitEndInfo) {
			r.add("%swaited %s %v of %v before %d err %v", prefix, w.Kind, w.Waited, w.Planned, w.Attempt, w.Err)
		},
		BreakerStateChanged: func(b BreakerChange) { r.add("%sbreaker %s: %s -> %s", prefix, b.Key, b.From, b.To) },
		CallGaveUp:          func(e CallEndInfo) { r.add("%sgave up: %s", prefix, e.GaveUp) },
		CallEnded: func(e CallEndInfo) {
			r.add("%send: %d attempts, waited %v, status %d, err %v, gave up %q", prefix, e.Attempts, e.Waited, e.StatusCode, e.Err, e.GaveUp)
		},
	}
}

func TestTraceOfA429429200Call(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(429, "Retry-After", "2"), answer(200))
		rec := &recorder{}
		tr := New(s.mock(), WithRetry(RetryPolicy{Jitter: JitterNone, InitialDelay: time.Millisecond}), WithTrace(rec.trace("")))
		ctx := WithEndpoint(WithCallTrace(context.Background(), rec.trace("call: ")), "card")
		if status, err := callOnce(t, tr, ctx); status != 200 {
			t.Fatalf("call = %d, %v", status, err)
		}
		want := []string{
			"attempt 1/5 GET api.example.com card",
			"call: attempt 1/5 GET api.example.com card",
			"response 1: 429 rate-limited hint 1s err <nil>",
			"call: response 1: 429 rate-limited hint 1s err <nil>",
			"retry 1/5 after 429 in 1s",
			"call: retry 1/5 after 429 in 1s",
			"wait backoff 1s before 2",
			"call: wait backoff 1s before 2",
			"waited backoff 1s of 1s before 2 err <nil>",
			"call: waited backoff 1s of 1s before 2 err <nil>",
			"attempt 2/5 GET api.example.com card",
			"call: attempt 2/5 GET api.example.com card",
			"response 2: 429 rate-limited hint 2s err <nil>",
			"call: response 2: 429 rate-limited hint 2s err <nil>",
			"retry 2/5 after 429 in 2s",
			"call: retry 2/5 after 429 in 2s",
			"wait backoff 2s before 3",
			"call: wait backoff 2s before 3",
			"waited backoff 2s of 2s before 3 err <nil>",
			"call: waited backoff 2s of 2s before 3 err <nil>",
			"attempt 3/5 GET api.example.com card",
			"call: attempt 3/5 GET api.example.com card",
			"response 3: 200 final hint 0s err <nil>",
			"call: response 3: 200 final hint 0s err <nil>",
			`end: 3 attempts, waited 3s, status 200, err <nil>, gave up ""`,
			`call: end: 3 attempts, waited 3s, status 200, err <nil>, gave up ""`,
		}
		if got := rec.lines(); !slices.Equal(got, want) {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

func TestTraceOfBreakerChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503), answer(200))
		rec := &recorder{}
		var policyHeard []string
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithTrace(rec.trace("")),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Second,
				OnStateChange: func(c BreakerChange) { policyHeard = append(policyHeard, c.To.String()) }}))
		_, _ = callOnce(t, tr, context.Background())
		time.Sleep(time.Second)
		_, _ = callOnce(t, tr, context.Background())
		var changes []string
		for _, e := range rec.lines() {
			if strings.HasPrefix(e, "breaker") {
				changes = append(changes, e)
			}
		}
		want := []string{"breaker api.example.com: closed -> open", "breaker api.example.com: open -> half-open",
			"breaker api.example.com: half-open -> closed"}
		if !slices.Equal(changes, want) || len(policyHeard) != 3 {
			t.Errorf("breaker events %q (the policy's hook heard %q), want %q", changes, policyHeard, want)
		}
	})
}

func TestGiveUpReasons(t *testing.T) {
	tests := []struct {
		name   string
		steps  []step
		opts   []Option
		ctx    func() (context.Context, context.CancelFunc)
		method string
		want   GiveUpReason
	}{
		{name: "attempts", steps: []step{answer(429, "Retry-After", "0")}, opts: []Option{WithRetry(RetryPolicy{MaxAttempts: 2})}, want: GiveUpAttempts},
		{name: "wait budget", steps: []step{answer(429, "Retry-After", "600")}, want: GiveUpWaitBudget},
		{name: "retry budget", steps: []step{answer(429, "Retry-After", "0")},
			opts: []Option{WithRetry(RetryPolicy{RetryBudget: 1e-9, RetryBudgetFloor: 1e-9})}, want: GiveUpRetryBudget},
		{name: "limit", steps: []step{answer(200)}, opts: []Option{WithLimit(Limit{MaxConcurrent: 1, FailFast: true})}, want: GiveUpLimit},
		{name: "deadline before the wait ends", steps: []step{answer(429, "Retry-After", "5")},
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Second)
			},
			want: GiveUpWaitBudget},
		{name: "canceled", steps: []step{answer(429, "Retry-After", "5")},
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(time.Second, cancel)
				return ctx, cancel
			},
			want: GiveUpCanceled},
		{name: "network", steps: []step{{err: errReset}}, method: http.MethodPost, want: GiveUpNetwork},
		{name: "breaker open", steps: []step{answer(503)},
			opts: []Option{WithRetry(RetryPolicy{MaxAttempts: 1}), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour})},
			want: GiveUpBreakerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.steps...)
				rec := &recorder{}
				tr := New(s.mock(), append(tt.opts, WithTrace(rec.trace("")))...)
				method := cmpOr(tt.method, http.MethodGet)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tt.ctx != nil {
					ctx, cancel = tt.ctx()
				}
				defer cancel()
				do := func() {
					resp, err := tr.RoundTrip(mustRequest(t, method, strings.NewReader("x")).WithContext(ctx))
					if err == nil {
						readAll(t, resp)
					}
				}
				switch tt.want {
				case GiveUpLimit:
					// One call holds the only slot with its body open; the next
					// may not queue.
					resp, err := tr.RoundTrip(mustRequest(t, method, nil))
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					do()
				case GiveUpBreakerOpen:
					do() // opens the breaker
					do()
				default:
					do()
				}
				st := tr.Stats()
				if st.Aborts[tt.want] != 1 {
					t.Errorf("Aborts = %v, want one %q", st.Aborts, tt.want)
				}
				if !slices.Contains(rec.lines(), "gave up: "+string(tt.want)) {
					t.Errorf("trace %q lacks the give-up", rec.lines())
				}
			})
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestStatsAfterAScriptedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(503, "Retry-After", "2"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{Jitter: JitterNone, InitialDelay: time.Millisecond, MaxAttempts: 3}), WithoutLearning())
		if status, _ := callOnce(t, tr, context.Background()); status != 200 {
			t.Fatalf("first call = %d", status)
		}
		s.reset(answer(429, "Retry-After", "0"))
		if status, _ := callOnce(t, tr, context.Background()); status != 429 {
			t.Fatalf("second call = %d", status)
		}
		s.reset(step{err: errors.New("dial https://user:hunter22@api.example.com/items?token=s3cr3t-token: refused")})
		req := mustRequest(t, http.MethodPost, nil)
		req.Header.Set("Apikey", "planted-api-key")
		if _, err := tr.RoundTrip(req); err == nil {
			t.Fatal("third call: no error")
		}
		st := tr.Stats()
		// 503 with Retry-After reads as rate-limited too.
		if st.Calls != 3 || st.Attempts != 3+3+1 || st.Retries != 2+2 || st.RateLimitHits != 2+3 || st.Succeeded != 1 {
			t.Errorf("counts = %+v", st)
		}
		if st.Aborts[GiveUpAttempts] != 1 || st.Aborts[GiveUpNetwork] != 1 || len(st.Aborts) != len(giveUpReasons) {
			t.Errorf("Aborts = %v, want one for attempts and one for network, every reason present", st.Aborts)
		}
		if want := map[string]int64{"429": 3, "503": 1}; !mapsEqual(st.RetriesByReason, want) {
			t.Errorf("RetriesByReason = %v, want %v", st.RetriesByReason, want)
		}
		if want := map[string]int64{"api.example.com": 5}; !mapsEqual(st.RateLimitHitsByKey, want) {
			t.Errorf("RateLimitHitsByKey = %v, want %v", st.RateLimitHitsByKey, want)
		}
		// The hints 1s and 2s, then the backoffs 1ms and 2ms of a Retry-After 0.
		backoff := st.WaitsByKind["backoff"]
		total := 3003 * time.Millisecond
		if backoff.Count != 4 || backoff.Total != total || st.Waits != 4 || st.TotalWait != total || st.AverageWait != total/4 {
			t.Errorf("waits = %d, %v, avg %v; backoff %+v; want 4 backoffs of 1s, 2s, 1ms, 2ms", st.Waits, st.TotalWait, st.AverageWait, backoff)
		}
		// 1ms, 2ms ≤ 0.1s; 1s ≤ 1s; 2s ≤ 2.5s.
		if want := []int64{2, 2, 2, 3, 4, 4, 4, 4, 4}; !slices.Equal(backoff.Buckets, want) {
			t.Errorf("backoff buckets = %v, want %v (bounds %v)", backoff.Buckets, want, WaitBuckets())
		}
		for _, secret := range []string{"hunter22", "s3cr3t-token"} {
			if strings.Contains(st.LastError, secret) {
				t.Errorf("LastError %q shows %q", st.LastError, secret)
			}
		}
		if !strings.Contains(st.LastError, "refused") {
			t.Errorf("LastError = %q, want the error", st.LastError)
		}
		js, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"calls":3`, `"attempts":7`, `"retries":4`, `"rate_limit_hits":5`, `"succeeded":1`,
			`"aborts":{`, `"attempts":1`, `"network":1`, `"waits":4`, `"total_wait_seconds":3.003`, `"average_wait_seconds":0.75075`,
			`"last_error":`, `"retries_by_reason":{"429":3,"503":1}`, `"waits_by_kind":{"backoff":{"count":4`, `"total_seconds":3.003`} {
			if !strings.Contains(string(js), want) {
				t.Errorf("JSON %s lacks %s", js, want)
			}
		}
	})
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestStatsKeysAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithPause(PausePolicy{Off: true}))
		for i := range StatsMaxKeys + 50 {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://api%d.example.com/", i), nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		hits := tr.Stats().RateLimitHitsByKey
		if len(hits) != StatsMaxKeys+1 || hits["other"] != 50 {
			t.Errorf("%d keys, other = %d; want %d keys and the 50 others under other", len(hits), hits["other"], StatsMaxKeys)
		}
	})
}

// A network timeout matches context.DeadlineExceeded, as net's errors do;
// it is still a network error, not the wait budget.
func TestNetworkTimeoutGivesUpAsNetwork(t *testing.T) {
	s := newScript(step{err: fmt.Errorf("dial tcp 10.0.0.1:443: i/o timeout: %w", context.DeadlineExceeded)})
	var got GiveUpReason
	tr := New(s.mock(), WithTrace(&Trace{CallGaveUp: func(e CallEndInfo) { got = e.GaveUp }}))
	if _, err := tr.RoundTrip(mustRequest(t, http.MethodPost, strings.NewReader("x"))); err == nil {
		t.Fatal("no error")
	}
	if got != GiveUpNetwork || tr.Stats().Aborts[GiveUpNetwork] != 1 {
		t.Errorf("gave up %q, aborts %v; want network", got, tr.Stats().Aborts)
	}
}

func TestCallsThatCannotStartEndCountedAndTraced(t *testing.T) {
	rec := &recorder{}
	tr := New(newScript(answer(200)).mock(), WithTrace(rec.trace("")))
	if _, err := tr.RoundTrip(&http.Request{Method: http.MethodGet, Header: http.Header{}}); err == nil {
		t.Fatal("a request without a URL: no error")
	}
	bad := WithRetryPolicy(context.Background(), RetryPolicy{MaxAttempts: -1})
	if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(bad)); err == nil {
		t.Fatal("an invalid call policy: no error")
	}
	broken := New(nil, WithLimit(Limit{Rate: -1}), WithTrace(rec.trace("broken: ")))
	if _, err := broken.RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil {
		t.Fatal("an invalid transport: no error")
	}
	if st := tr.Stats(); st.Calls != 2 || st.Aborts[GiveUpInvalid] != 2 {
		t.Errorf("Stats = %d requests, aborts %v; want both counted as invalid", st.Calls, st.Aborts)
	}
	var ends int
	for _, e := range rec.lines() {
		if strings.Contains(e, `gave up "invalid"`) {
			ends++
		}
	}
	if ends != 3 {
		t.Errorf("%d CallEnded with invalid, want 3:\n%s", ends, strings.Join(rec.lines(), "\n"))
	}
}

// A snapshot never shows a bucket above the count, whatever is being
// recorded meanwhile: it would be an invalid histogram.
func TestStatsHistogramIsConsistentUnderLoad(t *testing.T) {
	tr := New(nil)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				tr.counters.recordWait(WaitBackoff, time.Millisecond)
			}
		}
	}()
	for range 20000 {
		if w, ok := tr.Stats().WaitsByKind["backoff"]; ok && w.Buckets[len(w.Buckets)-1] > w.Count {
			t.Fatalf("bucket %d above count %d", w.Buckets[len(w.Buckets)-1], w.Count)
		}
	}
	close(stop)
	<-done
}

// Watching keys (a status, a scrape) is not a use of them: their state
// is still evicted when the keys go idle.
func TestWatchingDoesNotKeepIdleStateAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithBreaker(BreakerPolicy{}), WithLimit(Limit{Rate: 10}))
		get := func(host string) {
			req, _ := http.NewRequest(http.MethodGet, "https://"+host+"/x", nil)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				readAll(t, resp)
			}
		}
		for i := range 50 {
			get(fmt.Sprintf("h%d.test", i))
		}
		for i := range 240 { // an hour, scraped every 15s
			time.Sleep(15 * time.Second)
			tr.BreakerStatuses()
			tr.KeyStatus("h1.test")
			if i%4 == 0 {
				get(fmt.Sprintf("fresh%d.test", i)) // traffic elsewhere, so sweeps run
			}
		}
		if n := len(tr.BreakerStatuses()); n > 15 {
			t.Errorf("%d breakers held after an idle hour of scrapes, want the idle ones evicted", n)
		}
		if n := tr.scopes()[0].Len(); n > 15 {
			t.Errorf("%d limit states held, want the idle ones evicted", n)
		}
	})
}
