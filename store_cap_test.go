package ratewise

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
	"github.com/ratewise/ratewise/store"
)

// TestStoreLearnsACapOnItsOwnRequests: a server that serves 5 requests of
// a key at once, 50 ms each, and refuses a sixth at once, called by a
// transport with a store. No pace of the fleet's holds a cap (paced at
// the rate it serves, requests in flight jitter past it; paced low
// enough that they do not, a third of it goes unused: 1.44 of the least
// time on loopback): the transport learns the cap on its own requests
// in flight, as without a store, and the store learns no pace. Medians
// of five batches, as TestLearnedConcurrencyCap's.
func TestStoreLearnsACapOnItsOwnRequests(t *testing.T) {
	const batches = 5
	var ratios, refusals []float64
	capped, fleetPaced := 0, 0
	for range batches {
		synctest.Test(t, func(t *testing.T) {
			cfg := ratewisetest.Config{Model: ratewisetest.ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond}
			srv := ratewisetest.NewBucket(cfg)
			mem := NewMemoryStore()
			tr := New(srv, WithStore(mem))
			wall, failed := goodput(tr, 20, 300)
			if failed > 0 {
				t.Errorf("%d calls failed, want none", failed)
			}
			ratios = append(ratios, wall.Seconds()/cfg.Ideal(300).Seconds())
			refusals = append(refusals, float64(srv.Stats().Limited)/300)
			if st := tr.KeyStatus("api.test").Scopes[0]; st.InFlightCap >= 5 && st.InFlightCap <= 6 {
				capped++ // 6 while a probe is out
			}
			a, err := mem.Learn(context.Background(), tr.scopes()[0].StoreKey("api.test"), &store.LearnAsk{})
			if err != nil {
				t.Fatal(err)
			}
			if a.Paced {
				fleetPaced++
			}
		})
	}
	slices.Sort(ratios)
	slices.Sort(refusals)
	if ratios[batches/2] > 1.10 || refusals[batches/2] > 0.05 || capped <= batches/2 || fleetPaced > batches/2 {
		t.Errorf("of the ideal %.2f, refusals a call %.3f, the cap of 5 learned in %d of %d, the store paced in %d; "+
			"want medians at most 1.10 and 0.05, most at 5, most not paced by the store",
			ratios, refusals, capped, batches, fleetPaced)
	}
}

// TestStoreBurstRunOutGoesBackToTheFleet: a bucket of 50 a second, burst
// 10, whose first wave's refusals can look like a cap on a transport's
// requests in flight (TestBurstRunOutIsNoCap). Called through a store,
// the transport holds the key to the cap in doubt, its tellers show a
// bucket, and the key goes back to the store's pace with the refusal:
// the store paces it in every run, and the runs that show a cap first
// take 1.00 of the least time (about half of 20; the others 1.07, as
// every run did when the store took the first wave's refusals alone).
// None takes more than 1.15: when the bucket refilled as the tellers
// went, they show a cap, held until a refusal ends it (1.10 to 1.12, one
// run in 20 or fewer).
func TestStoreBurstRunOutGoesBackToTheFleet(t *testing.T) {
	const runs = 20
	var ratios []float64
	unpaced, within := 0, 0
	for range runs {
		synctest.Test(t, func(t *testing.T) {
			srv := bucketAPI(50, 10, 5*time.Millisecond, false)
			mem := NewMemoryStore()
			tr := New(srv, WithStore(mem))
			wall, failed := goodput(tr, 20, 500)
			if failed > 0 {
				t.Errorf("%d calls failed, want none", failed)
			}
			ratio := wall.Seconds() / (490.0 / 50)
			ratios = append(ratios, ratio)
			if ratio <= 1.05 {
				within++
			}
			a, err := mem.Learn(context.Background(), tr.scopes()[0].StoreKey("api.test"), &store.LearnAsk{})
			if err != nil {
				t.Fatal(err)
			}
			if !a.Paced {
				unpaced++
			}
		})
	}
	slices.Sort(ratios)
	if ratios[runs-1] > 1.15 || within < runs/4 || unpaced > 0 {
		t.Errorf("of the least time, sorted: %.3f; the store paced the bucket in %d of %d runs; "+
			"want none above 1.15, a quarter at least within 1.05, every one paced", ratios, runs-unpaced, runs)
	}
}
