package ratewise

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/ratewisetest"
)

// Tests of told limits as ceilings: the learned scope beside them learns
// only what the server refuses under them.

// TestToldLimitKeptToTheLetter: a told limit the server never
// contradicts paces to the letter, though the server counts its quota on
// every answer and the learned scope stays beside it: 25 calls of 5
// workers at 10/s, burst 5, take exactly 2s, against a server that
// allows twice as much.
func TestToldLimitKeptToTheLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := ratewisetest.NewBucket(ratewisetest.Config{Rate: 20, Burst: 10, PublishHeaders: true, IETFHeaders: true})
		tr := New(srv, WithLimit(Limit{Rate: 10, Burst: 5}))
		wall, failed := goodput(tr, 5, 25)
		if wall != 2*time.Second || failed != 0 {
			t.Errorf("25 calls took %v, %d failed; want 2s and none", wall, failed)
		}
		if st := tr.KeyStatus("api.test").Scopes; len(st) != 2 || st[1].Counted || st[1].LearnedRate != 0 {
			t.Errorf("scopes %+v, want the learned scope to have learned nothing", st)
		}
	})
}

// TestToldLimitIsACeiling: a server that refuses under a told limit
// makes the key learn below it, never above: a cut below the told 10 a
// second, climbing back, then, past it with no refusal, the told pace
// alone again.
func TestToldLimitIsACeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(200))
		tr := New(s.mock(), WithLimit(Limit{Rate: rate.Every(100 * time.Millisecond), Burst: 1}))
		start := time.Now()
		for range 30 {
			if status, err := callOnce(t, tr, context.Background()); status != 200 && status != 429 {
				t.Fatalf("call = %d, %v", status, err)
			}
		}
		at := s.offsets(start)
		if len(at) != 31 || at[1] != time.Second {
			t.Fatalf("requests at %v, want 31, the refused first retried after its 1s hint", at)
		}
		var gaps []time.Duration
		for i := 2; i < len(at); i++ {
			gaps = append(gaps, at[i]-at[i-1])
		}
		if slices.Min(gaps) < 100*time.Millisecond {
			t.Errorf("gaps %v: one below the told 100ms", gaps)
		}
		if gaps[0] <= 100*time.Millisecond {
			t.Errorf("gaps %v: the first after the refusal at the told pace, want the learned pace below it", gaps)
		}
		if last := gaps[len(gaps)-5:]; slices.Max(last) != 100*time.Millisecond {
			t.Errorf("the last gaps %v, want the told 100ms: the learned pace climbed back past it", last)
		}
	})
}

// TestToldWindowCorrectedBySlidingCounter: told "50 a second" as a
// window, a sliding-window counter of 50 a second refuses its bursts; the
// key learns a smooth pace below the told one and finishes the batch
// within 1.10 of the least time, at most 0.05 refusals a call, as it does
// told nothing.
func TestToldWindowCorrectedBySlidingCounter(t *testing.T) {
	for _, told := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			sleepToThisDecade(370 * time.Millisecond)
			cfg := ratewisetest.Config{Model: ratewisetest.SlidingWindow, Limit: 50, Window: time.Second,
				RetryAfter: ratewisetest.RetryAfterWindow}
			srv := ratewisetest.NewBucket(cfg)
			var opts []Option
			if told {
				opts = append(opts, WithLimit(Limit{Name: "told", Burst: 50, Window: time.Second}))
			}
			tr := New(srv, opts...)
			wall, failed := goodput(tr, 20, 500)
			ratio := wall.Seconds() / cfg.Ideal(500).Seconds()
			refused := float64(srv.Stats().Limited) / 500
			if failed > 0 {
				t.Errorf("told %v: %d calls failed, want none", told, failed)
			}
			if ratio > 1.10 || refused > 0.05 {
				figuref(t, "told %v: %.2f of the ideal, %.3f refused a call; want at most 1.10, 0.05", told, ratio, refused)
			}
			if !told {
				return
			}
			st := tr.KeyStatus("api.test").Scopes
			if learned := st[len(st)-1]; learned.Name != LearnedScope || learned.LearnedRate <= 0 || learned.LearnedRate > 50 {
				t.Errorf("the learned scope %+v, want a pace learned at or below the told 50 a second", learned)
			}
		})
	}
}

// TestToldAnewIsTrustedAgain: what a key learned under a told limit the
// server refused is forgotten when the limit is told anew: SetLimit with
// the server's real numbers paces by them alone, bursts and all.
func TestToldAnewIsTrustedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := ratewisetest.NewBucket(ratewisetest.Config{Rate: 5, Burst: 5})
		tr := New(srv, WithLimit(Limit{Name: "plan", Rate: 10, Burst: 10}))
		goodput(tr, 5, 40) // the told 10/s is refused: the key learns below it
		if st := tr.KeyStatus("api.test").Scopes; st[1].LearnedRate <= 0 {
			t.Fatalf("scopes %+v, want a pace learned under the refused plan", st)
		}
		if err := tr.SetLimit(Limit{Name: "plan", Rate: 5, Burst: 5}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the server's bucket and the plan's fill again
		limited := srv.Stats().Limited
		wall, failed := goodput(tr, 5, 10)
		if wall != time.Second || failed != 0 || srv.Stats().Limited != limited {
			t.Errorf("10 calls under the plan told anew took %v, %d failed, %d refused; want 1s (5 at once, then 5/s), none",
				wall, failed, srv.Stats().Limited-limited)
		}
	})
}

// TestToldWindowYieldsToASlidingCounter: told "30 per 10 s" as a window,
// a sliding-window counter of 30 per 10 s refuses the window's second
// turn with a Retry-After of the whole window. That turn is the window's
// probe, sent alone: the one refusal of the run, fewer than told nothing
// meets. The window yields: no request waits out that hint, the key is
// not paused, and the rest goes spread, one each Window/(Burst−½); the
// batch takes within 0.02 of the least time told nothing takes, with no
// refusal after the yield.
func TestToldWindowYieldsToASlidingCounter(t *testing.T) {
	ratios := map[bool]float64{}
	refusals := map[bool]int{}
	for _, told := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			sleepToThisDecade(370 * time.Millisecond)
			cfg := ratewisetest.Config{Model: ratewisetest.SlidingWindow, Limit: 30, Window: 10 * time.Second,
				RetryAfter: ratewisetest.RetryAfterWindow}
			srv := ratewisetest.NewBucket(cfg)
			log := &sendLog{base: srv, start: time.Now()}
			var opts []Option
			if told {
				opts = append(opts, WithLimit(Limit{Name: "told", Burst: 30, Window: 10 * time.Second}))
			}
			wall, failed := goodput(New(log, opts...), 10, 120)
			ratios[told] = wall.Seconds() / cfg.Ideal(120).Seconds()
			if failed > 0 {
				t.Errorf("told %v: %d calls failed, want none", told, failed)
			}
			at, status := log.sends()
			for _, st := range status {
				if st == 429 {
					refusals[told]++
				}
			}
			if !told {
				return
			}
			yield := slices.Index(status, 429)
			if yield < 0 || at[yield] < 10*time.Second {
				t.Fatalf("the first refusal at %v, want the window's second turn, 10 s in", at)
			}
			for i := yield + 1; i < len(at); i++ {
				if status[i] == 429 && at[i] > at[yield] {
					t.Errorf("refused at %v, after the yield at %v", at[i], at[yield])
				}
				if gap := at[i] - at[i-1]; gap > time.Second {
					t.Errorf("%v between the requests at %v and %v: the key waited out a hint", gap, at[i-1], at[i])
				}
			}
		})
	}
	if refusals[true] != 1 || refusals[true] > refusals[false] {
		t.Errorf("told the window: %d refusals; told nothing: %d; want the probe's alone, and no more", refusals[true], refusals[false])
	}
	if ratios[true] > ratios[false]+0.02 {
		figuref(t, "told the window: %.3f of the ideal; told nothing: %.3f; want within 0.02", ratios[true], ratios[false])
	}
}

// sendLog records when each request went, from start, and its status.
type sendLog struct {
	base  http.RoundTripper
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
	codes []int
}

func (l *sendLog) RoundTrip(req *http.Request) (*http.Response, error) {
	at := time.Since(l.start)
	resp, err := l.base.RoundTrip(req)
	if err == nil {
		l.mu.Lock()
		l.at, l.codes = append(l.at, at), append(l.codes, resp.StatusCode)
		l.mu.Unlock()
	}
	return resp, err
}

// sends returns when each request went and its status, in the order
// they were answered.
func (l *sendLog) sends() ([]time.Duration, []int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at), slices.Clone(l.codes)
}

// cutReset is a server whose X-RateLimit-Reset, a Unix time, is a
// second early, as one that cuts its window's end to the second
// (ulule/limiter) gives it for a window that ends late in its second.
type cutReset struct{ base http.RoundTripper }

func (c cutReset) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil {
		if unix, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			resp.Header.Set("X-RateLimit-Reset", strconv.FormatInt(unix-1, 10))
		}
	}
	return resp, err
}

// TestToldWindowTakesTheServersTurn: told the server's window, a window
// whose server aligns its windows to the clock (a part of one gone at
// the first request) and says their end on every answer, as a Unix time,
// sends its next burst as the server's first window ends, not a Window
// after its own first: as fast as a client told nothing, which reads the
// same counts, and never refused. A reset cut to its second (cutReset)
// that frees a probe early costs that probe's refusal, the only one,
// and the window then holds to its starts' own Windows, in the time of
// a window told nothing of the server's turns. A window of 10 s opened
// by the first request, whose cut reset would free the starts less than
// a second early, does not take it, and is never refused.
func TestToldWindowTakesTheServersTurn(t *testing.T) {
	for _, tc := range []struct {
		name           string
		model          ratewisetest.Model
		window         time.Duration
		limit, workers int
		cut            bool
		refused        int  // told
		fast           bool // told: as fast as told nothing; else the starts' own Windows
	}{
		{"clock's 30 per 10 s", ratewisetest.FixedWindow, 10 * time.Second, 30, 10, false, 0, true},
		{"clock's 30 per 10 s, reset cut", ratewisetest.FixedWindow, 10 * time.Second, 30, 10, true, 1, false},
		{"clock's 10 per 1 s", ratewisetest.FixedWindow, time.Second, 10, 5, false, 0, true},
		{"first request's 10 per 1 s, reset cut", ratewisetest.FixedWindowFromFirst, time.Second, 10, 5, true, 1, false},
		{"first request's 30 per 10 s, reset cut", ratewisetest.FixedWindowFromFirst, 10 * time.Second, 30, 10, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 4 * tc.limit
			ownWindows := 3 * (tc.window + limit.WindowMargin) // a window told nothing of the server's turns
			walls := map[bool]time.Duration{}
			for _, told := range []bool{false, true} {
				synctest.Test(t, func(t *testing.T) {
					sleepToThisDecade(37 * tc.window / 100) // 37 % into a window of the clock's
					srv := ratewisetest.NewBucket(ratewisetest.Config{Model: tc.model, Limit: tc.limit, Window: tc.window,
						PublishHeaders: true, Reset: ratewisetest.ResetUnix, RetryAfter: ratewisetest.RetryAfterNone})
					var base http.RoundTripper = srv
					if tc.cut {
						base = cutReset{srv}
					}
					var opts []Option
					if told {
						opts = append(opts, WithLimit(Limit{Name: "told", Burst: tc.limit, Window: tc.window}))
					}
					wall, failed := goodput(New(base, opts...), tc.workers, calls)
					walls[told] = wall
					if !told {
						return
					}
					if refused := srv.Stats().Limited; failed != 0 || refused != tc.refused {
						t.Errorf("told: %d refused, %d failed; want %d refused, none failed", refused, failed, tc.refused)
					}
					if !tc.fast && (wall < ownWindows || wall > ownWindows+tc.window/10) {
						t.Errorf("told: %d calls took %v; want about %v, the starts' own Windows", calls, wall, ownWindows)
					}
				})
			}
			// The told window keeps its margin after each turn.
			if tc.fast && walls[true] > walls[false]+3*limit.WindowMargin {
				t.Errorf("told the window: %v; told nothing: %v; want no longer", walls[true], walls[false])
			}
		})
	}
}

// lateFirst holds the requests of a batch's first instant back by late
// before they reach base, as new connections' handshakes hold a batch's
// first requests.
type lateFirst struct {
	base  http.RoundTripper
	late  time.Duration
	first atomic.Int64 // the first request's start, in Unix nanoseconds
}

func (l *lateFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	l.first.CompareAndSwap(0, now.UnixNano())
	// No lock the others would wait on: synctest's clock must move.
	if until := time.Unix(0, l.first.Load()).Add(l.late); now.Before(until) && now.Sub(time.Unix(0, l.first.Load())) < time.Millisecond {
		time.Sleep(until.Sub(now))
	}
	return l.base.RoundTrip(req)
}

// TestToldWindowWaitsForALateFirstRequest: told the server's 30 per 10 s,
// a window that a batch's first requests opened when they reached the
// server 20 ms after they were sent (ulule/limiter's, its reset a Unix time cut to
// the second) has not turned when the told window's next turn comes, a
// margin of 5 ms after the first start's Window. The refusals of the probe
// say the reset is due: the turns are held back 10 ms, then 20, and the
// window does not yield: about the least time, two refusals.
func TestToldWindowWaitsForALateFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepToThisDecade(3700 * time.Millisecond)
		srv := ratewisetest.NewBucket(ratewisetest.Config{Model: ratewisetest.FixedWindowFromFirst, Limit: 30, Window: 10 * time.Second,
			PublishHeaders: true, Reset: ratewisetest.ResetUnix, RetryAfter: ratewisetest.RetryAfterNone})
		tr := New(cutReset{&lateFirst{base: srv, late: 20 * time.Millisecond}},
			WithLimit(Limit{Name: "told", Burst: 30, Window: 10 * time.Second}))
		wall, failed := goodput(tr, 10, 120)
		if refused := srv.Stats().Limited; failed != 0 || refused > 2 || wall > 3*aWindowOn+100*time.Millisecond {
			t.Errorf("120 calls took %v, %d refused, %d failed; want about %v, at most 2 refused, none failed", wall, refused, failed, 3*aWindowOn)
		}
	})
}
