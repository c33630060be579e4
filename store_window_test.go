package ratewise

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

// TestStoreWindowKeepsItsQuotaAndItsTurn: a fixed window of 50 a second,
// whose answers take 500 µs, called by 20 workers through a transport
// with a store. The requests the store lets go in one instant reach the
// server in any order, and the one refused as the window runs out may be
// one let go before others that passed; counted as the turns before it,
// the quota was 46 of 50 and stayed there, window after window (1.17 of
// the least time in a third of the runs). And the first wave, refused
// whole, left the store to search for a pace through the next window,
// which it ran out 400 ms late: held to that refusal's hint, in whole
// seconds, its turns stayed 400 ms late for good (1.06). Each of 10 runs
// within 1.05.
func TestStoreWindowKeepsItsQuotaAndItsTurn(t *testing.T) {
	for run := range 10 {
		synctest.Test(t, func(t *testing.T) {
			cfg := ratewisetest.Config{Model: ratewisetest.FixedWindow, Limit: 50, Window: time.Second, Latency: 500 * time.Microsecond}
			srv := ratewisetest.NewBucket(cfg)
			wall, failed := goodput(New(srv, WithStore(NewMemoryStore())), 20, 500)
			if failed > 0 {
				t.Errorf("run %d: %d calls failed, want none", run, failed)
			}
			if ratio := wall.Seconds() / cfg.Ideal(500).Seconds(); ratio > 1.05 {
				t.Errorf("run %d: %.3f of the least time (%v), want within 1.05", run, ratio, wall)
			}
		})
	}
}

// TestStoreWindowOfTenSecondsGivesEachWindowAtOnce: a fixed window of 30
// per 10 s, whose answers take 500 µs, called by 20 workers through a
// transport with a store, all 20 held by the first window's refusals.
// Each window after gives its 30 within 100 ms of reopening, in each of
// 10 runs. Two ways it did not: the window's first turn, which asks
// whether the window reopened, withdrawn by its request to wait out the
// pause, left the others waiting for its outcome, a second; and its
// turns, let go in one instant, reached the server in any order: the
// one refused, let go before others that passed, counted only the turns
// before it, two thirds of the quota, and the key, taken for a sliding
// window's, was paced at 3 a second (1.65 of the least time).
func TestStoreWindowOfTenSecondsGivesEachWindowAtOnce(t *testing.T) {
	for run := range 10 {
		synctest.Test(t, func(t *testing.T) {
			cfg := ratewisetest.Config{Model: ratewisetest.FixedWindow, Limit: 30, Window: 10 * time.Second, Latency: 500 * time.Microsecond}
			srv := ratewisetest.NewBucket(cfg)
			start := time.Now()
			var mu sync.Mutex
			var passed []time.Duration
			tr := &Trace{ResponseClassified: func(r ResponseInfo) {
				if r.StatusCode == http.StatusOK {
					mu.Lock()
					passed = append(passed, time.Since(start))
					mu.Unlock()
				}
			}}
			if _, failed := goodput(New(srv, WithStore(NewMemoryStore()), WithTrace(tr)), 20, 120); failed > 0 {
				t.Errorf("run %d: %d calls failed, want none", run, failed)
			}
			mu.Lock()
			defer mu.Unlock()
			for w := range 4 {
				opens := time.Duration(w) * cfg.Window
				soon := 0
				for _, at := range passed {
					if at >= opens && at < opens+100*time.Millisecond {
						soon++
					}
				}
				if soon != cfg.Limit {
					t.Errorf("run %d: window %d gave %d in its first 100 ms, want its %d", run, w+1, soon, cfg.Limit)
				}
			}
		})
	}
}
