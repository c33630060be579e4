package ratewise

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

// fleetRun is one fleet's run: its wall time over the ideal, the
// refusals per call and the failed calls.
type fleetRun struct {
	ratio, refused float64
	failed         int
	why            string
}

func (r fleetRun) String() string {
	return fmt.Sprintf("%.2f · %.3f · %d failed", r.ratio, r.refused, r.failed)
}

// holdsOrMedian runs run once and, when held says its figures miss, twice
// more: a run is a draw (the retries' jitter, the order fake time wakes
// goroutines in, a probe refused as the batch ends, whose hint of a second
// the call then waits), and the median of three run by run, each figure,
// is what is held. Failed calls add up over the runs.
func holdsOrMedian(run func() fleetRun, held func(fleetRun) bool) fleetRun {
	first := run()
	if held(first) {
		return first
	}
	runs := []fleetRun{first, run(), run()}
	ratios := []float64{runs[0].ratio, runs[1].ratio, runs[2].ratio}
	refused := []float64{runs[0].refused, runs[1].refused, runs[2].refused}
	slices.Sort(ratios)
	slices.Sort(refused)
	median := fleetRun{ratio: ratios[1], refused: refused[1]}
	for _, r := range runs {
		median.failed += r.failed
		if median.why == "" {
			median.why = r.why
		}
	}
	return median
}

// runFleet makes calls calls, workers at once dealt to replicas
// transports in turn, each built by newReplica over a fresh server of
// cfg and one MemoryStore they may share, in fake time.
func runFleet(t *testing.T, cfg ratewisetest.Config, replicas, workers, calls int,
	newReplica func(base http.RoundTripper, shared *MemoryStore) http.RoundTripper) fleetRun {
	var run fleetRun
	synctest.Test(t, func(t *testing.T) {
		sleepToThisDecade(370 * time.Millisecond) // servers that count in Unix seconds see this decade
		srv := ratewisetest.NewBucket(cfg)
		shared := NewMemoryStore()
		trs := make([]http.RoundTripper, replicas)
		for i := range trs {
			trs[i] = newReplica(srv, shared)
		}
		jobs := make(chan struct{})
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := time.Now()
		for w := range workers {
			tr := trs[w%replicas]
			wg.Go(func() {
				for range jobs {
					req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
					}
					if err != nil || resp.StatusCode != 200 {
						mu.Lock()
						run.failed++
						if run.why == "" && err != nil {
							run.why = err.Error()
						} else if run.why == "" {
							run.why = resp.Status
						}
						mu.Unlock()
					}
				}
			})
		}
		for range calls {
			jobs <- struct{}{}
		}
		close(jobs)
		wg.Wait()
		run.ratio = time.Since(start).Seconds() / cfg.Ideal(calls).Seconds()
		run.refused = float64(srv.Stats().Limited) / float64(calls)
	})
	return run
}

// fleetModels are the servers a fleet learns in fake time: buckets with
// and without a hint, with their count in headers, a leaky bucket, fixed
// windows (a hint, a Unix reset) and one from the first request, and a
// sliding window whose hint is the whole window, all of 50 a second.
var fleetModels = []struct {
	name string
	cfg  ratewisetest.Config
}{
	{"bucket, Retry-After", ratewisetest.Config{Rate: 50, Burst: 10}},
	{"bucket, no hint", ratewisetest.Config{Rate: 50, Burst: 10, RetryAfter: ratewisetest.RetryAfterNone}},
	{"bucket, counted", ratewisetest.Config{Rate: 50, Burst: 10, PublishHeaders: true, IETFHeaders: true}},
	{"leaky bucket", ratewisetest.Config{Model: ratewisetest.LeakyBucket, Rate: 50, Burst: 10, NoDelay: true}},
	{"fixed window", ratewisetest.Config{Model: ratewisetest.FixedWindow, Limit: 50, Window: time.Second}},
	{"fixed window, Unix reset", ratewisetest.Config{Model: ratewisetest.FixedWindow, Limit: 50, Window: time.Second,
		PublishHeaders: true, Reset: ratewisetest.ResetUnix, RetryAfter: ratewisetest.RetryAfterNone}},
	{"first-request window", ratewisetest.Config{Model: ratewisetest.FixedWindowFromFirst, Limit: 50, Window: time.Second}},
	{"sliding window", ratewisetest.Config{Model: ratewisetest.SlidingWindow, Limit: 50, Window: time.Second,
		RetryAfter: ratewisetest.RetryAfterWindow}},
}

// TestFleetLearnsAsOne: four and eight transports given one store, none
// told the limit, call one server of each model: the fleet learns it as
// one client does, within 1.10 of the least time and 0.035 refusals a
// call (a fleet of independent learners takes up to 2.3 times it, with
// 0.06 to 0.28 refusals; see holdsOrMedian), and no call fails.
func TestFleetLearnsAsOne(t *testing.T) {
	for _, m := range fleetModels {
		for _, replicas := range []int{4, 8} {
			t.Run(fmt.Sprintf("%s, %d replicas", m.name, replicas), func(t *testing.T) {
				run := holdsOrMedian(func() fleetRun {
					return runFleet(t, m.cfg, replicas, 5*replicas, 500, func(base http.RoundTripper, shared *MemoryStore) http.RoundTripper {
						return New(base, WithStore(shared))
					})
				}, func(r fleetRun) bool { return r.ratio <= 1.10 && r.refused <= 0.035 })
				t.Logf("wall / ideal · refused per call · failed: %v", run)
				if run.failed != 0 {
					t.Errorf("%d calls failed (%s), want none", run.failed, run.why)
				}
				if run.ratio > 1.10 || run.refused > 0.035 {
					figuref(t, "%v, want at most 1.10 of the least time and 0.035 refusals a call", run)
				}
			})
		}
	}
}

// A refusal one replica sees paces every replica: the first refusal of
// a's request, after four were let through (a rate's; one after fewer is
// tried first, see TestSharedTrialTellsAShedderWithoutSlowing), arms the key's
// pace in the store, and b, which was never refused, takes its turns
// from it, an interval of the search's first pace apart, rather than the
// burst it sent before.
func TestRefusalOneReplicaSeesPacesEveryReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		refuseOnce := newScript(answer(200), answer(200), answer(200), answer(200), answer(429), answer(200)).mock()
		a := New(refuseOnce, WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}))
		rec := &recording{base: newScript(answer(200)).mock()}
		b := New(rec, WithStore(mem))
		for range 3 {
			if _, err := callOnce(t, b, t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for range 4 {
			if status, _ := callOnce(t, a, t.Context()); status != 200 {
				t.Fatalf("a's call before the refusal: %d, want 200", status)
			}
		}
		if status, _ := callOnce(t, a, t.Context()); status != 429 {
			t.Fatalf("a's call: %d, want the refusal", status)
		}
		for range 3 {
			if _, err := callOnce(t, b, t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if gap := rec.times[1].Sub(rec.times[0]); gap != 0 {
			t.Errorf("b before any refusal: requests %v apart, want them unpaced", gap)
		}
		for i := 4; i < len(rec.times); i++ {
			if gap := rec.times[i].Sub(rec.times[i-1]); gap < 39*time.Millisecond {
				t.Errorf("b after a's refusal: requests %d and %d %v apart, want the fleet's pace, 40ms at least", i, i+1, gap)
			}
		}
		if st := b.KeyStatus(host).Scopes[0]; st.LearnedRate <= 0 {
			t.Errorf("b's status after a's refusal: %+v, want the fleet's learned rate", st)
		}
	})
}

// One transport with a store learns as it does without one: a store
// costs it no pace (within 0.08 of the least time, or of its time alone
// when that is more: less than a probe refused as the batch ends costs,
// whose hint of a second its call waits; see holdsOrMedian).
func TestOneTransportWithAStoreLearnsAsAlone(t *testing.T) {
	for _, m := range fleetModels {
		t.Run(m.name, func(t *testing.T) {
			alone := runFleet(t, m.cfg, 1, 20, 500, func(base http.RoundTripper, _ *MemoryStore) http.RoundTripper {
				return New(base)
			})
			shared := holdsOrMedian(func() fleetRun {
				return runFleet(t, m.cfg, 1, 20, 500, func(base http.RoundTripper, shared *MemoryStore) http.RoundTripper {
					return New(base, WithStore(shared))
				})
			}, func(r fleetRun) bool { return r.ratio <= max(alone.ratio, 1)+0.08 })
			t.Logf("with a store %v, alone %v", shared, alone)
			if shared.failed != 0 {
				t.Errorf("%d calls failed (%s), want none", shared.failed, shared.why)
			}
			if shared.ratio > max(alone.ratio, 1)+0.08 {
				figuref(t, "with a store %v, alone %v: want it within 0.08 of alone", shared, alone)
			}
		})
	}
}

// TestOneTransportWithAStoreReadsCountsOutOfOrder: one transport with a
// store, 20 workers, against fixed windows of 50 a second that count
// their quota in headers, each request up to 2ms late on its way, so that
// requests sent together reach the server in another order than they
// took their turns in. The store reads a count for the turns the server
// saw, not for its turn's number: at most 0.05 refusals a call, the first
// window's, and no slower than alone (read by its turn's number, 0.21 to
// 0.26 refusals a call and up to 1.19 of the least time in fake time; on
// loopback, against ulule/limiter, 1.3 to 2 times it).
func TestOneTransportWithAStoreReadsCountsOutOfOrder(t *testing.T) {
	for _, model := range []ratewisetest.Model{ratewisetest.FixedWindow, ratewisetest.FixedWindowFromFirst} {
		t.Run(model.String(), func(t *testing.T) {
			cfg := ratewisetest.Config{Model: model, Limit: 50, Window: time.Second, PublishHeaders: true,
				LatencyJitter: 2 * time.Millisecond, Seed: 1}
			alone := runFleet(t, cfg, 1, 20, 500, func(base http.RoundTripper, _ *MemoryStore) http.RoundTripper {
				return New(base)
			})
			shared := runFleet(t, cfg, 1, 20, 500, func(base http.RoundTripper, shared *MemoryStore) http.RoundTripper {
				return New(base, WithStore(shared))
			})
			t.Logf("with a store %v, alone %v", shared, alone)
			if shared.failed != 0 {
				t.Errorf("%d calls failed (%s), want none", shared.failed, shared.why)
			}
			if shared.refused > 0.05 || shared.ratio > max(alone.ratio, 1)+0.05 {
				t.Errorf("with a store %v, alone %v: want at most 0.05 refusals a call, within 0.05 of alone", shared, alone)
			}
		})
	}
}

// TestSlowStartEndsWhenTheFleetIsPaced: 200 workers through one
// transport with a store, against an nginx queued leaky bucket (20 a
// second, a queue of 10, refusals with no hint). The slow start's first
// refusal paces the fleet, and the requests waiting in slow start take
// their turns of that pace: left in slow start, each would be let go by
// the refusal of the one before it, the queue full, and the whole wave
// was refused in an instant (0.66 refusals a call, 59 calls failed).
func TestSlowStartEndsWhenTheFleetIsPaced(t *testing.T) {
	cfg := ratewisetest.Config{Model: ratewisetest.LeakyBucket, Rate: 20, Burst: 10, RetryAfter: ratewisetest.RetryAfterNone}
	run := runFleet(t, cfg, 1, 200, 300, func(base http.RoundTripper, shared *MemoryStore) http.RoundTripper {
		return New(base, WithStore(shared))
	})
	t.Logf("with a store %v", run)
	if run.failed != 0 {
		t.Errorf("%d calls failed (%s), want none", run.failed, run.why)
	}
	if run.refused > 0.05 {
		t.Errorf("%.3f refusals a call, want at most 0.05", run.refused)
	}
}

// TestSharedTrialTellsAShedderWithoutSlowing: a transport with a store,
// whose first request is refused with no hint, nothing let through
// before, sends its next requests at once, and they are let through one
// in three, as a shedder's are: the fleet is never paced (another
// replica's requests go unpaced, and none learned a rate; the status of
// the one that ran the trial says Blind), and the refusals that follow,
// while the key holds blind, pace nobody either.
// Told the store at once, the first refusal paced the fleet at the
// search's first pace, 40 ms a request. A bucket that others emptied
// refuses every request sent at once after the refusal: the trial then
// tells the store, and the fleet is paced.
func TestSharedTrialTellsAShedderWithoutSlowing(t *testing.T) {
	shed := []step{answer(429), answer(429), answer(429), answer(200)}
	for range 5 {
		shed = append(shed, answer(429), answer(429), answer(200))
	}
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		rec := &recording{base: newScript(shed...).mock()}
		a := New(rec, WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}))
		other := &recording{base: newScript(answer(200)).mock()}
		b := New(other, WithStore(mem))
		for range len(shed) {
			if _, err := callOnce(t, a, t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			if _, err := callOnce(t, b, t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []*recording{rec, other} {
			if d := r.times[len(r.times)-1].Sub(r.times[0]); d != 0 {
				t.Errorf("%d requests took %v, want them unpaced", len(r.times), d)
			}
		}
		for name, tr := range map[string]*Transport{"a": a, "b": b} {
			if st := tr.KeyStatus(host).Scopes[0]; st.LearnedRate > 0 || st.Blind != (name == "a") {
				t.Errorf("%s's status on a shedder: %+v, want no learned rate, blind where the trial ran", name, st)
			}
		}
	})
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		a := New(newScript(answer(429)).mock(), WithStore(mem), WithRetry(RetryPolicy{MaxAttempts: 1}))
		b := New(newScript(answer(200)).mock(), WithStore(mem))
		for range 10 {
			if _, err := callOnce(t, a, t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if st := b.KeyStatus(host).Scopes[0]; st.LearnedRate <= 0 {
			t.Errorf("b's status after a's trial found a rate: %+v, want the fleet's learned rate", st)
		}
	})
}
