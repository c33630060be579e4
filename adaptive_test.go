package ratewise

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/internal/keyed"
)

var refused = serverAnswer{refused: true, remaining: -1}
var succeeded = serverAnswer{ok: true, remaining: -1}

// sendAt takes the head of the line's place at now or when it comes, and
// returns the request's number and when it went.
func sendAt(t *testing.T, a *adaptiveState, now time.Time) (uint64, time.Time) {
	t.Helper()
	for range 100 {
		seq, delay, ready, sent := a.take(now)
		switch {
		case sent:
			return seq, now
		case delay > 0:
			now = now.Add(delay)
		case ready != nil:
			t.Fatalf("the line waits for an answer at %v", now)
		}
	}
	t.Fatal("no place in the pace after 100 tries")
	return 0, now
}

func TestAdaptiveOneDecreasePerEvent(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(100, math.Inf(1))
	now := t0
	var seqs []uint64
	for range 8 {
		var seq uint64
		seq, now = sendAt(t, a, now)
		seqs = append(seqs, seq)
	}
	before := a.rate(now)
	a.outcome(seqs[0], refused, now)
	after := a.rate(now)
	if want := before * adaptiveCut; math.Abs(after-want) > 1e-9 {
		t.Fatalf("rate after a refusal = %.2f, want %.2f (%.2f cut by %v)", after, want, before, adaptiveCut)
	}
	// Its siblings, sent before the decrease, are the same event.
	for _, seq := range seqs[1:] {
		a.outcome(seq, refused, now)
	}
	if got := a.rate(now); got != after {
		t.Fatalf("rate after 7 refused siblings = %.2f, want it left at %.2f", got, after)
	}
	// A request sent after the decrease and refused is a new event.
	seq, now := sendAt(t, a, now)
	a.outcome(seq, refused, now)
	if got := a.rate(now); got >= after {
		t.Errorf("rate after a new refusal = %.2f, want below %.2f", got, after)
	}
}

func TestAdaptiveIncreasesOnlyWhileSucceeding(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(20, math.Inf(1))
	start := a.rate(t0)
	if got := a.rate(t0.Add(time.Hour)); got != start {
		t.Fatalf("rate an idle hour later = %.2f, want it still %.2f", got, start)
	}
	// Requests that fail for another reason than rate do not raise it.
	now := t0
	for range 100 {
		var seq uint64
		seq, now = sendAt(t, a, now)
		a.outcome(seq, serverAnswer{remaining: -1}, now)
	}
	if got := a.rate(now); got != start {
		t.Fatalf("rate after 100 failures = %.2f, want it still %.2f", got, start)
	}
	// Successes at the pace do, and more the longer they last.
	var rates []float64
	for range 4 {
		for range 40 {
			var seq uint64
			seq, now = sendAt(t, a, now)
			a.outcome(seq, succeeded, now)
		}
		rates = append(rates, a.rate(now))
	}
	if rates[0] <= start || !slices.IsSorted(rates) || rates[3] <= rates[0] {
		t.Errorf("rates after 40, 80, 120, 160 successes = %.2f, want each above the last, from above %.2f", rates, start)
	}
}

func TestAdaptiveMeasuresBetweenRefusals(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(100, math.Inf(1))
	seq, now := sendAt(t, a, t0)
	a.outcome(seq, refused, now)
	// The key keeps sending at its pace, and the server lets S through
	// until it refuses again 2s later: it refills S/2 a second, give or
	// take a token.
	mark, s := now, 0
	for now.Sub(mark) < 2*time.Second {
		seq, now = sendAt(t, a, now)
		a.outcome(seq, succeeded, now)
		s++
	}
	seq, now = sendAt(t, a, now)
	a.outcome(seq, refused, now)
	span := now.Sub(mark).Seconds()
	if got, want := a.rate(now), float64(s-1)/span; math.Abs(got-want) > 1e-9 {
		t.Errorf("pace after a measure of %d in %.2fs = %.2f, want the low end, %.2f", s, span, got, want)
	}
	// A key whose demand falls below its pace lets the server's bucket
	// fill: the next refusal measures nothing, and only cuts the pace.
	mark = now
	before := a.rate(now)
	for range 20 {
		seq, now = sendAt(t, a, now.Add(time.Second))
		a.outcome(seq, succeeded, now)
	}
	seq, now = sendAt(t, a, now)
	climbed := a.rate(now)
	a.outcome(seq, refused, now)
	if got := a.rate(now); math.Abs(got-climbed*adaptiveCut) > 1e-9 {
		t.Errorf("pace after an idle span = %.2f, want a cut of %.2f, not a measure of 20 in %v (from %.2f)",
			got, climbed, now.Sub(mark), before)
	}
}

func TestAdaptiveResumesAtHalfAfterLongPause(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(40, math.Inf(1))
	a.pause(t0.Add(5 * time.Second))
	seq, now := sendAt(t, a, t0.Add(6*time.Second))
	if got := a.rate(now); got != 20 {
		t.Fatalf("rate after the pause = %.2f, want half of 40", got)
	}
	for range 10 {
		a.outcome(seq, succeeded, now)
		seq, now = sendAt(t, a, now)
	}
	if got := a.rate(now); got <= 20 || got >= 40 {
		t.Errorf("rate after 10 successes = %.2f, want it climbing from 20 towards 40", got)
	}
	for range 40 {
		a.outcome(seq, succeeded, now)
		seq, now = sendAt(t, a, now)
	}
	if got := a.rate(now); got < 40 || got > 41 {
		t.Errorf("rate after 50 successes = %.2f, want it back at 40, probing beyond by the 2%% band", got)
	}
}

// windowServer is an API with a fixed window quota, which publishes its
// count: it refuses every request over limit until the window turns.
type windowServer struct {
	mu       sync.Mutex
	limit    int
	window   time.Duration
	start    time.Time
	used     int
	times    []time.Time
	refusals int
}

func (s *windowServer) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.start.IsZero() || now.Sub(s.start) >= s.window {
		s.start, s.used = now, 0
	}
	s.times = append(s.times, now)
	status := 200
	if s.used < s.limit {
		s.used++
	} else {
		status = 429
		s.refusals++
	}
	reset := s.start.Add(s.window).Sub(now)
	h := http.Header{
		"X-Ratelimit-Limit":     {strconv.Itoa(s.limit)},
		"X-Ratelimit-Remaining": {strconv.Itoa(s.limit - s.used)},
		"X-Ratelimit-Reset":     {strconv.Itoa(int(math.Ceil(reset.Seconds())))},
	}
	if status == 429 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(reset.Seconds()))))
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func TestAdaptiveCountedBucketIsNeverRefused(t *testing.T) {
	for _, workers := range []int{20, 200} {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(50, 10, 5*time.Millisecond, true)
			tr := New(srv, WithLimit(Limit{Adaptive: true}))
			_, failed, why := goodputErr(tr, workers, 300)
			if refused := srv.Stats().Limited; refused != 0 || failed != 0 {
				t.Errorf("%d workers: %d refused, %d failed calls (%s), want none: the count said what the server would take",
					workers, refused, failed, why)
			}
		})
	}
}

// TestAdaptiveCountedWindowIsSentAtOnce: a window's quota, counted, is
// sent at once and then waited for until the reset the count says, as a
// client that knows the window does: the refill a count of none left
// suggests (limit/reset) is tried once, the one refusal.
func TestAdaptiveCountedWindowIsSentAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &windowServer{limit: 30, window: time.Minute}
		tr := New(srv)
		wall, failed := goodput(tr, 10, 45)
		if srv.refusals > 1 || failed != 0 {
			t.Fatalf("%d refused, %d failed calls, want at most the one try of the refill and none", srv.refusals, failed)
		}
		first := srv.times[0]
		var inFirstSecond, beforeReset int
		for _, at := range srv.times {
			switch d := at.Sub(first); {
			case d < time.Second:
				inFirstSecond++
			case d < time.Minute:
				beforeReset++
			}
		}
		if inFirstSecond != 30 || beforeReset > 1 || wall != time.Minute {
			t.Errorf("%d requests in the first second, %d more before the reset, all done in %v; want the quota of 30 at once, "+
				"at most the one try before the reset, the rest at the reset, 1m", inFirstSecond, beforeReset, wall)
		}
	})
}

// maxInAnySecond returns the most requests that started within one second.
func maxInAnySecond(times []time.Time) int {
	most := 0
	for i := range times {
		n := 0
		for _, other := range times[i:] {
			if other.Sub(times[i]) < time.Second {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// recording notes when each request reaches base.
type recording struct {
	base  http.RoundTripper
	mu    sync.Mutex
	times []time.Time
}

func (r *recording) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.times = append(r.times, time.Now())
	r.mu.Unlock()
	return r.base.RoundTrip(req)
}

func TestAdaptiveNeverExceedsRate(t *testing.T) {
	for _, headers := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(500, 100, 0, headers)
			rec := &recording{base: srv}
			tr := New(rec, WithLimit(Limit{Adaptive: true, Rate: 20}))
			if _, failed := goodput(tr, 20, 200); failed != 0 {
				t.Fatalf("%d failed calls", failed)
			}
			times := slices.Clone(rec.times)
			slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
			// A late start keeps its cadence: one more may fall in a second.
			if got := maxInAnySecond(times); got > 21 {
				t.Errorf("headers %v: %d requests in one second, want at most Rate 20 (+1)", headers, got)
			}
		})
	}
}

func TestAdaptiveLearnsTheServersRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(50, 10, 0, false)
		tr := New(srv, WithRetry(RetryPolicy{MaxAttempts: 10}), WithLimit(Limit{Adaptive: true}))
		_, failed := goodput(tr, 20, 500)
		if refused := srv.Stats().Limited; failed != 0 || float64(refused) > 0.05*500 {
			t.Errorf("%d refused, %d failed calls, want at most 25 and none", refused, failed)
		}
		st := tr.LimitStatus("api.test").Scopes[0]
		if !st.Adaptive || st.Counted || st.LearnedRate < 45 || st.LearnedRate > 55 {
			t.Errorf("status = %+v, want an adaptive pace within 10%% of the server's 50", st)
		}
	})
}

func TestAdaptiveStatusOfACountedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(50, 10, 0, true)
		tr := New(srv, WithLimit(Limit{Adaptive: true}))
		if _, failed := goodput(tr, 20, 200); failed != 0 {
			t.Fatalf("%d failed calls", failed)
		}
		st := tr.LimitStatus("api.test").Scopes[0]
		if !st.Adaptive || !st.Counted || st.QuotaRemaining > 10 || st.LearnedRate < 40 || st.LearnedRate > 50 {
			t.Errorf("status = %+v, want the server's count and a sure refill just under its 50", st)
		}
		js, _ := json.Marshal(st)
		for _, want := range []string{`"adaptive":true`, `"counted":true`, `"quota_remaining":`, `"learned_rate_per_second":`} {
			if !strings.Contains(string(js), want) {
				t.Errorf("JSON %s lacks %s", js, want)
			}
		}
	})
}

func TestAdaptiveForgetsIdleKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := bucketAPI(5, 1, 0, false)
		tr := New(srv, WithLimit(Limit{Adaptive: true, IdleTimeout: time.Minute}))
		get := func(host string) {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+host+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		for range 5 {
			get("api.test") // refused at first, then paced
		}
		s := tr.scopes()[0]
		if e := s.states.Acquire("api.test", false); e == nil || e.State.adapt.Load().unpaced {
			t.Fatal("the key learned nothing from its refusals")
		} else {
			s.states.Release(e)
		}
		// Requests to other hosts, which learn nothing, drive the sweeps.
		for i := range 4 {
			time.Sleep(30 * time.Second)
			for range keyed.SweepCheckEvery {
				get("other-" + strconv.Itoa(i) + ".test")
			}
		}
		if e := s.states.Acquire("api.test", false); e != nil {
			s.states.Release(e)
			t.Error("an idle key's pace is still held after its idle timeout")
		}
	})
}

func TestAdaptiveBreakerCloseResumesGently(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A 503 opens the breaker; its probe's success closes it: the
		// server just recovered, and the key's pace resumes at half.
		s := newScript(answer(503), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithLimit(Limit{Adaptive: true, StartRate: 40}),
			WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: 10 * time.Second}))
		if status, _ := callOnce(t, tr, context.Background()); status != 503 {
			t.Fatalf("first call = %d, want the 503", status)
		}
		e := tr.scopes()[0].states.Acquire(host, false)
		defer tr.scopes()[0].states.Release(e)
		a := e.State.adapt.Load()
		a.mu.Lock()
		before := a.rate(time.Now())
		a.mu.Unlock()
		if status, err := callOnce(t, tr, context.Background()); status != 200 || err != nil {
			t.Fatalf("the probe = %d, %v; want the 200 after the cooldown", status, err)
		}
		// The key's next request resumes at half (see
		// TestAdaptiveResumesAtHalfAfterLongPause).
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.resumeAt != time.Now() {
			t.Fatalf("resume at %v, want now, as the breaker closed", a.resumeAt)
		}
		a.resume(time.Now())
		if got := a.rate(time.Now()); got != before*adaptiveResume {
			t.Errorf("pace after the breaker closed = %.1f, want half of %.1f", got, before)
		}
	})
}

// TestAdaptiveLongHintHoldsTheKeyAsAWindow: a refusal asking for more
// than a second holds every request of the key until then, as a window's
// end; then they go at once, not at the pace the key had.
func TestAdaptiveLongHintHoldsTheKeyAsAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "5"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithCooldown(CooldownPolicy{Off: true}),
			WithLimit(Limit{Adaptive: true, StartRate: 2}))
		start := time.Now()
		if status, _ := callOnce(t, tr, context.Background()); status != 429 {
			t.Fatalf("first call = %d, want the 429", status)
		}
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				if status, err := callOnce(t, tr, context.Background()); status != 200 {
					t.Errorf("call = %d, %v; want 200", status, err)
				}
			})
		}
		wg.Wait()
		at := s.offsets(start)
		if want := []time.Duration{0, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}; !slices.Equal(at, want) {
			t.Errorf("requests at %v, want the refused one, then the other five at the end of its 5s hint, at once", at)
		}
	})
}

func TestReadAnswer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		want   serverAnswer
	}{
		{"no count", 200, http.Header{}, serverAnswer{ok: true, remaining: -1}},
		{"X-RateLimit", 200, http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"30"}},
			serverAnswer{ok: true, remaining: 12, limit: 60, reset: 30 * time.Second}},
		{"X-RateLimit reset as a Unix time", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}},
			serverAnswer{ok: true, remaining: 0, reset: time.Hour}},
		{"RateLimit-* with a policy in Limit", 200, http.Header{"Ratelimit-Limit": {"100, 100;w=60"}, "Ratelimit-Remaining": {"99"}, "Ratelimit-Reset": {"59"}},
			serverAnswer{ok: true, remaining: 99, limit: 100, reset: 59 * time.Second}},
		{"IETF RateLimit and Policy", 200, http.Header{"Ratelimit": {`"hour";r=500;t=1800, "burst";r=3;t=1`}, "Ratelimit-Policy": {`"hour";q=1000;w=3600, "burst";q=10;w=1`}},
			serverAnswer{ok: true, remaining: 3, limit: 10, reset: time.Second}},
		{"IETF RateLimit, dictionary form", 200, http.Header{"Ratelimit": {"limit=100, remaining=7, reset=30"}},
			serverAnswer{ok: true, remaining: 7, reset: 30 * time.Second}},
		{"IETF RateLimit, a policy per line", 200, http.Header{"Ratelimit": {`"burst";r=3;t=5`, `"day";r=0;t=60`}},
			serverAnswer{ok: true, remaining: 0, reset: time.Minute}},
		{"refused", 429, http.Header{"X-Ratelimit-Remaining": {"0"}}, serverAnswer{refused: true, remaining: 0}},
		{"garbage count", 200, http.Header{"X-Ratelimit-Remaining": {"lots"}}, serverAnswer{ok: true, remaining: -1}},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: tt.header}
		class := Final
		if tt.status == 429 {
			class = RateLimited
		}
		if got := readAnswer(resp, nil, class, now); got != tt.want {
			t.Errorf("%s: readAnswer = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := readAnswer(nil, errReset, Final, now); got.ok || got.refused || got.remaining != -1 {
		t.Errorf("network error: readAnswer = %+v, want no outcome and no count", got)
	}
}

func TestCountKeepsATokenForRequestsOnTheirWay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(0, math.Inf(1))
	// No limit or refill known: only the remaining count allows requests.
	a.outcome(0, serverAnswer{ok: true, remaining: 3}, t0)
	var sent int
	for range 5 {
		if _, _, _, ok := a.take(t0); !ok {
			break
		}
		sent++
	}
	// The first goes on the count of 3; with it on its way, 3 − 1 − 1 for
	// reordering leaves room for one more; with two, none.
	if sent != 2 {
		t.Errorf("sent %d on a count of 3 with nothing known to refill, want 2", sent)
	}
}

func TestCountOutOfDateIsAskedAgain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(0, math.Inf(1))
	// A refusal says none is left until the reset, in a second.
	a.outcome(0, serverAnswer{refused: true, remaining: 0, reset: time.Second}, t0)
	if _, _, _, sent := a.take(t0.Add(500 * time.Millisecond)); sent {
		t.Fatal("sent before the reset on a count of 0")
	}
	// After it, with nothing on its way to bring a new count, one request
	// goes to learn it, rather than the key waiting for ever.
	if _, _, _, sent := a.take(t0.Add(time.Second)); !sent {
		t.Fatal("nothing sent after the reset: the key would stall")
	}
}

func TestCountsTogetherTakeTheLowest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(0, math.Inf(1))
	// Answers to requests the server took together come in any order.
	a.outcome(2, serverAnswer{ok: true, remaining: 4}, t0)
	a.outcome(3, serverAnswer{ok: true, remaining: 6}, t0.Add(time.Millisecond))
	if got := a.count.remaining; got != 4 {
		t.Errorf("count after 4 then 6 a millisecond apart = %d, want the lower, 4", got)
	}
	a.outcome(4, serverAnswer{ok: true, remaining: 7}, t0.Add(time.Second))
	if got := a.count.remaining; got != 7 {
		t.Errorf("count a second later = %d, want the new 7", got)
	}
	a.outcome(1, serverAnswer{ok: true, remaining: 9}, t0.Add(2*time.Second))
	if got := a.count.remaining; got != 7 {
		t.Errorf("count after a late answer to an older request = %d, want 7 kept", got)
	}
}

func TestAdaptiveCeilingHoldsOverAnySpan(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(0, 1) // a Rate of 1 a second as the ceiling
	for _, at := range []time.Duration{0, 1990 * time.Millisecond} {
		seq, _, _, sent := a.take(t0.Add(at))
		if !sent {
			t.Fatalf("no request at %v", at)
		}
		a.outcome(seq, succeeded, t0.Add(at+time.Millisecond))
	}
	// A head a little late must not make up for it with a second request
	// within the interval.
	if _, delay, _, sent := a.take(t0.Add(2 * time.Second)); sent || delay != 990*time.Millisecond {
		t.Errorf("at 2s: sent %v, delay %v; want a wait of 990ms, a second after the last", sent, delay)
	}
}

func TestAdaptiveIdleBatchesKeepTheirPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A batch job: 50 calls every 10 minutes against 10 a second. The
		// idle time between batches is no measure of the server.
		srv := bucketAPI(10, 10, 20*time.Millisecond, false)
		tr := New(srv, WithLimit(Limit{Adaptive: true}))
		for i := range 5 {
			wall, failed, why := goodputErr(tr, 10, 50)
			// The ideal is (50 − 10) / 10 = 4s.
			if failed != 0 || wall > 6*time.Second {
				t.Fatalf("batch %d: %v, %d failed (%s); want each near the 4s the server allows", i, wall, failed, why)
			}
			time.Sleep(10 * time.Minute)
		}
	})
}

func TestCountOfNoneWithoutResetIsAskedAgainSlowly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAdaptiveState(0, math.Inf(1))
	// Every answer is a refusal saying none is left, and no reset.
	var sends []time.Time
	for now := t0; now.Before(t0.Add(time.Minute)); {
		seq, delay, _, sent := a.take(now)
		if !sent {
			now = now.Add(max(delay, time.Millisecond))
			continue
		}
		sends = append(sends, now)
		now = now.Add(time.Millisecond)
		a.outcome(seq, serverAnswer{refused: true, remaining: 0, limit: 10}, now)
	}
	// Asked again after 1s, 2s, 4s, 8s, 16s, 32s: 7 in the first minute.
	if len(sends) > 7 {
		t.Errorf("%d requests in a minute against a count of none left, want the asks spaced out, at most 7", len(sends))
	}
}
