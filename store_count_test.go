package ratewise

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

// TestStoreCountHeldToItsResetSeesTheRefill: a bucket of 50 a second,
// burst 10, that counts its quota on every answer, with a reset rounded
// up to the second (when the bucket is full again), 100 µs away, called
// by a transport with a store. The first burst's counts leave nothing,
// and the store holds the key to their reset, a second; with every
// request waiting for it, no answer showed the bucket refill before it,
// and the key went at 10 a second, its burst each reset: 5.00 of the
// least time. A count that comes while the store holds the key to its
// reset, and leaves some, is asked with at once: the store sees the
// refill and paces the key at it. Nine runs of 500 calls of 20 workers:
// the median within 1.30 of the least time, none above 2 (of 40 runs,
// 1.00 to 1.39, half within 1.09: the refill is measured from counts
// that come out of order, which the store does not correct for a
// bucket).
func TestStoreCountHeldToItsResetSeesTheRefill(t *testing.T) {
	const runs = 9
	var ratios []float64
	for range runs {
		synctest.Test(t, func(t *testing.T) {
			cfg := ratewisetest.Config{Rate: 50, Burst: 10, PublishHeaders: true, IETFHeaders: true, Latency: 100 * time.Microsecond}
			srv := ratewisetest.NewBucket(cfg)
			wall, failed := goodput(New(srv, WithStore(NewMemoryStore())), 20, 500)
			if failed > 0 {
				t.Errorf("%d calls failed, want none", failed)
			}
			ratios = append(ratios, wall.Seconds()/cfg.Ideal(500).Seconds())
		})
	}
	slices.Sort(ratios)
	if ratios[runs/2] > 1.30 || ratios[runs-1] > 2 {
		t.Errorf("of the least time, sorted: %.3f; want the median within 1.30, none above 2", ratios)
	}
}
