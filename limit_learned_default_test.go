package ratewise

import (
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/ratewisetest"
)

// Tests of learning as the default: what New does without options.

// fixedResponse answers every request with the same response, allocating
// nothing, so that an allocation counted is the transport's own.
type fixedResponse struct{ resp *http.Response }

func (f fixedResponse) RoundTrip(*http.Request) (*http.Response, error) { return f.resp, nil }

func TestDefaultPathAllocatesNothing(t *testing.T) {
	base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody,
		Header: http.Header{"Content-Type": {"application/json"}, "Date": {"Mon, 02 Jan 2026 15:04:05 GMT"}}}}
	for _, tt := range []struct {
		name string
		tr   *Transport
	}{
		{"New", New(base)},
		{"every preset", New(base, WithPreset(Moderate()))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := mustRequest(t, http.MethodGet, nil)
			for range max(quotaReadFirst, learn.StartDone) + 1 { // the slow start, and the answers read in full at first
				if _, err := tt.tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := tt.tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
			})
			// The breaker of the preset, clean, allocates nothing either.
			if allocs != 0 {
				t.Errorf("%v allocations a request, want none", allocs)
			}
		})
	}
}

// TestSlowStartDoublesEachRoundTrip: a key that has learned nothing
// sends its first request alone, and each success lets one more be in
// flight, so that a wave of 64 workers against a server of 10 ms goes out
// 1, 2, 4, 8, 16, then the 33 left, one round trip apart.
func TestSlowStartDoublesEachRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := ratewisetest.NewBucket(ratewisetest.Config{Latency: 10 * time.Millisecond})
		tr := New(srv)
		start := time.Now()
		goodput(tr, 64, 64)
		perTrip := map[time.Duration]int{}
		for _, at := range srv.Arrivals() {
			perTrip[at.Sub(start)]++
		}
		want := map[time.Duration]int{0: 1, 10 * time.Millisecond: 2, 20 * time.Millisecond: 4,
			30 * time.Millisecond: 8, 40 * time.Millisecond: 16, 50 * time.Millisecond: 32, 60 * time.Millisecond: 1}
		if fmt.Sprint(perTrip) != fmt.Sprint(want) {
			t.Errorf("requests sent per round trip %v, want %v", perTrip, want)
		}
	})
}

// TestSlowStartCostsOneRoundTripOfRefusals: against a bucket of 10
// refilled at 20/s, with 10 ms to answer, the first wave of 50 or 200
// workers is refused for about one round trip: at most 15 times in its
// first 60 ms (the slow start's fourth round, 8 at once, and the few the
// successes of that round let go before its refusals arm the pace), not
// once a worker; the batch takes at most 1.05 of the ideal time, and at
// most 0.10 refusals a call in all, the learned pace's own included
// (0.05 to 0.07 in most runs, up to 0.11 in one of 100: the goroutines'
// order at each instant of fake time moves a refusal or two; two runs of
// three must hold, holdsInTwoOfThree).
func TestSlowStartCostsOneRoundTripOfRefusals(t *testing.T) {
	for _, workers := range []int{50, 200} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			holdsInTwoOfThree(t, func() (measured string, held bool) {
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					var mu sync.Mutex
					var firstWave int // refusals in the first 60 ms
					srv := ratewisetest.NewBucket(ratewisetest.Config{Rate: 20, Burst: 10, Latency: 10 * time.Millisecond})
					tr := New(srv, WithTrace(&Trace{ResponseClassified: func(r ResponseInfo) {
						mu.Lock()
						defer mu.Unlock()
						if r.StatusCode == 429 && time.Since(start) < 60*time.Millisecond {
							firstWave++
						}
					}}))
					wall, failed := goodput(tr, workers, 300)
					if failed > 0 {
						t.Errorf("%d workers: %d calls failed, want none", workers, failed)
					}
					ideal := time.Duration(float64(300-10) / 20 * float64(time.Second))
					ratio, refused := wall.Seconds()/ideal.Seconds(), float64(srv.Stats().Limited)/300
					measured = fmt.Sprintf("%d refusals in the first 60ms, %.2f of the ideal, %.3f refused a call", firstWave, ratio, refused)
					held = firstWave <= 15 && ratio <= 1.05 && refused <= 0.10
				})
				return measured, held
			})
		})
	}
}

func TestLearningIsTheDefault(t *testing.T) {
	base := fixedResponse{&http.Response{StatusCode: 200, Body: http.NoBody}}
	tests := []struct {
		name    string
		opts    []Option
		learned bool
	}{
		{"no options", nil, true},
		{"a concurrency cap only", []Option{WithLimit(Limit{MaxConcurrent: 4})}, true},
		{"every preset", []Option{WithPreset(Conservative())}, true},
		{"a told rate: a ceiling learned under", []Option{WithLimit(Limit{Rate: 10})}, true},
		{"a told spacing", []Option{WithLimit(Limit{MinSpacing: time.Second})}, true},
		{"a told window", []Option{WithLimit(Limit{Burst: 30, Window: time.Minute})}, true},
		{"an adaptive limit of one's own", []Option{WithLimit(Limit{Name: "mine", Adaptive: true, Key: Global})}, false},
		{"an adaptive limit of one's own for some requests", []Option{WithLimit(Limit{Name: "search", Adaptive: true, Applies: isSearch})}, true},
		{"WithoutLearning", []Option{WithoutLearning()}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limits := New(base, tt.opts...).Limits()
			learned := slices.ContainsFunc(limits, func(l Limit) bool { return l.Name == LearnedScope })
			if learned != tt.learned {
				t.Errorf("limits %+v: the learned scope is there %v, want %v", limits, learned, tt.learned)
			}
		})
	}
}

// TestUnthrottledKeyIsSentUnpaced: a key that has seen no rate-limit
// signal is not paced at all, keeps no state once answered, and learns
// from its first refusal on.
func TestUnthrottledKeyIsSentUnpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock())
		start := time.Now()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if status, err := callOnce(t, tr, context.Background()); status != 200 {
					t.Errorf("call = %d, %v", status, err)
				}
			})
		}
		wg.Wait()
		if at := s.offsets(start); len(at) != 50 || at[len(at)-1] != 0 {
			t.Fatalf("requests at %v, want 50 at once", at)
		}
		st := tr.KeyStatus(host).Scopes[0]
		if st.Name != LearnedScope || st.LearnedRate != 0 || st.Counted {
			t.Errorf("status %+v, want the learned scope with nothing learned", st)
		}
		// A refusal arms the key: its next requests are paced.
		s.reset(answer(429, "Retry-After", "1"), answer(200))
		if status, _ := callOnce(t, tr, noWait()); status != 429 {
			t.Fatalf("call = %d, want the 429", status)
		}
		if st := tr.KeyStatus(host).Scopes[0]; st.LearnedRate <= 0 || math.IsInf(st.LearnedRate, 0) {
			t.Errorf("status after a refusal %+v, want a learned pace", st)
		}
	})
}

// countingServer counts its quota in X-RateLimit-* headers: limit
// requests, then a 429 until reset, when the quota comes back whole. With
// noCounts it says nothing but a Retry-After to the window's end on a
// refusal. With unixReset it says its reset as a Unix time cut to the
// second, as ulule/limiter does, and no Retry-After. The window opens at
// the first request.
type countingServer struct {
	mu       sync.Mutex
	limit    int
	window   time.Duration
	noCounts bool
	// countsFrom, when set, is how few remaining the count must say
	// before the server sends it, as some APIs warn only near the end.
	countsFrom int
	unixReset  bool
	// latency is how long each request takes, answered or refused.
	latency time.Duration
	start   time.Time
	used    int
	at      []time.Time
	refused []time.Time
}

func (s *countingServer) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.latency > 0 {
		time.Sleep(s.latency)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.start.IsZero() || now.Sub(s.start) >= s.window {
		s.start, s.used = now, 0
	}
	s.at = append(s.at, now)
	status := 200
	if s.used < s.limit {
		s.used++
	} else {
		status = 429
		s.refused = append(s.refused, now)
	}
	h := http.Header{}
	reset := strconv.Itoa(int(math.Ceil(s.start.Add(s.window).Sub(now).Seconds())))
	if s.unixReset {
		reset = strconv.FormatInt(s.start.Add(s.window).Unix(), 10)
	}
	if !s.noCounts && (s.countsFrom == 0 || s.limit-s.used <= s.countsFrom) {
		h.Set("X-Ratelimit-Limit", strconv.Itoa(s.limit))
		h.Set("X-Ratelimit-Remaining", strconv.Itoa(s.limit-s.used))
		h.Set("X-Ratelimit-Reset", reset)
	}
	if status == 429 && !s.unixReset {
		h.Set("Retry-After", reset)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

// TestScoutKeepsTheFirstWaveWithinTheCount: a key's first request goes
// alone; its answer says how many the server will take, and the others
// wait for it rather than be refused. (The refill a count of none left
// suggests, limit/reset, is tried once before the reset: a window has
// none, and says so with the one refusal.)
func TestScoutKeepsTheFirstWaveWithinTheCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &countingServer{limit: 5, window: time.Minute}
		tr := New(srv)
		wall, failed := goodput(tr, 20, 8)
		first := srv.at[0]
		var atOnce, early int
		for _, at := range srv.at {
			switch d := at.Sub(first); {
			case d == 0:
				atOnce++
			case d < time.Minute:
				early++
			}
		}
		if len(srv.refused) > 1 || failed != 0 || atOnce != 5 || early > 1 || wall != time.Minute {
			t.Errorf("%d refused, %d failed, %d requests at once, %d more before the reset, done in %v; "+
				"want at most the one try of the refill, none failed, the quota of 5 at once, the rest at the reset a minute on",
				len(srv.refused), failed, atOnce, early, wall)
		}
	})
}

// TestLateCountIsReadOnAnUnpacedKey: a server that sends its count only
// when little is left, after the key's slow start ended with nothing
// learned and its requests went unpaced. The answers are still drawn to
// be read for a count (one in quotaSampleEvery; 200 of them here), and
// the one read stops the key before the quota runs out, rather than the
// whole wave in flight being refused. Each request takes a millisecond:
// in a fake time that never moves, one worker could run the rest of the
// quota out in real time while another sat between its look at the key,
// unpaced then, and its send.
func TestLateCountIsReadOnAnUnpacedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &countingServer{limit: 600, window: time.Minute, countsFrom: 200, latency: time.Millisecond}
		tr := New(srv)
		wall, failed := goodput(tr, 8, 700)
		if len(srv.refused) > 1 || failed != 0 || wall > time.Minute+time.Second {
			t.Errorf("%d refused, %d failed, done in %v; want at most the one try of the refill, none failed, done at the reset a minute on",
				len(srv.refused), failed, wall)
		}
	})
}

// TestRefusalsAloneTeachAWindow: a window that says only Retry-After on
// its refusals, in whole seconds. Refused again and again with nothing
// let through, the key learns the server refills nothing between its
// turns: from then on it waits for each turn and sends the window's quota
// at once, refused once a window at most.
func TestRefusalsAloneTeachAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &countingServer{limit: 50, window: time.Second, noCounts: true}
		tr := New(srv)
		wall, failed := goodput(tr, 20, 500)
		if failed != 0 {
			t.Fatalf("%d calls failed", failed)
		}
		// The least it can take is 9s: ten windows of 50.
		if ratio := wall.Seconds() / 9; ratio > 1.10 {
			t.Errorf("500 calls took %v, %.2f of the ideal 9s; want at most 1.10", wall, ratio)
		}
		// The first windows' refusals teach; each later one is refused
		// about once, when its first request past the quota asks whether
		// it turned: within 0.05 a call of the 400 calls left, where a
		// client that takes the window for a bucket is refused by the
		// dozen in each.
		first := srv.at[0]
		late := 0
		for _, at := range srv.refused {
			if at.Sub(first) >= 2*time.Second {
				late++
			}
		}
		if late > 20 {
			t.Errorf("%d refusals after the first two windows, want at most 20, 0.05 of the 400 calls left (all: %d)", late, len(srv.refused))
		}
		// KeyStatus says what the key learned.
		st := tr.KeyStatus("api.test").Scopes[0]
		b, _ := json.Marshal(st)
		if !st.Windowed || st.WindowQuota != 50 || !strings.Contains(string(b), `"windowed":true,"window_quota":50`) {
			t.Errorf("status %s, want the window and its quota of 50", b)
		}
	})
}

// TestResetCutToTheSecondIsAskedAgain: a window opened by the first
// request whose count says its reset as a Unix time cut to the second,
// and refuses with no hint. At the reset it says, the window still has up
// to a second to run: one request asks, is refused, asks again a little
// later, and the quota goes at once when the window turns. The key then
// knows the window ends a whole number of seconds after the request that
// opened it, and waits for that. Whatever the fraction of a second the
// windows are cut by, the batch takes at most 1.05 of the ideal.
func TestResetCutToTheSecondIsAskedAgain(t *testing.T) {
	for _, tt := range []struct {
		limit, workers, calls int
		window                time.Duration
		cut                   time.Duration // how far into a second the first window opens
	}{
		{30, 10, 120, 10 * time.Second, 600 * time.Millisecond},
		{50, 20, 500, time.Second, 100 * time.Millisecond},
		{50, 20, 500, time.Second, 600 * time.Millisecond},
		{50, 20, 500, time.Second, 990 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("%d per %v cut by %v", tt.limit, tt.window, tt.cut), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepToThisDecade(tt.cut)
				srv := &countingServer{limit: tt.limit, window: tt.window, unixReset: true}
				wall, failed := goodput(New(srv), tt.workers, tt.calls)
				ideal := time.Duration((tt.calls+tt.limit-1)/tt.limit-1) * tt.window
				most := int(0.05 * float64(tt.calls))
				if ratio := wall.Seconds() / ideal.Seconds(); failed != 0 || ratio > 1.05 || len(srv.refused) > most {
					t.Errorf("%d calls took %v (%.2f of the ideal %v), %d refused, %d failed; "+
						"want at most 1.05, %d refused (0.05 a call), none failed", tt.calls, wall, ratio, ideal, len(srv.refused), failed, most)
				}
			})
		})
	}
}

// TestLearnedWindowIsSharedThroughTheCooldownStore: a window one
// transport learned from refusals holds every transport that shares its
// pause store, as a hint's pause does.
func TestLearnedWindowIsSharedThroughTheCooldownStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &countingServer{limit: 5, window: time.Second, noCounts: true}
		mem := NewMemoryStore()
		a := New(srv, WithPause(PausePolicy{Store: mem}), WithRetry(RetryPolicy{MaxAttempts: 1}))
		b := New(srv, WithPause(PausePolicy{Store: mem}))
		for range 200 {
			if st := a.KeyStatus("api.test").Scopes[0]; st.Windowed && st.HeldFor > 0 {
				break
			}
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			resp, err := a.RoundTrip(req)
			if err == nil {
				readAll(t, resp)
			}
		}
		st := a.KeyStatus("api.test").Scopes[0]
		if !st.Windowed || st.HeldFor <= 0 {
			t.Fatalf("status %+v: the first transport learned no window", st)
		}
		reopens := time.Now().Add(st.HeldFor)
		before := len(srv.at)
		req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
		resp, err := b.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if sent := srv.at[before]; sent.Before(reopens) {
			t.Errorf("the second transport sent %v before the window the first learned reopens", reopens.Sub(sent))
		}
	})
}
