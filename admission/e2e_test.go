package admission

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise"
)

// batch sends calls GETs through tr, workers at a time, and returns when
// the last is answered.
func batch(t *testing.T, tr http.RoundTripper, calls, workers int) {
	t.Helper()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range jobs {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.test/items", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("RoundTrip: %v", err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	for i := range calls {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
}

// adr-009, criterion "a ratewise client against a ratewise server is
// never refused after its first answer": a client with the defaults, not
// told the limit, against the ADR's per-IP 10/min (burst 5) and global
// 100/min (burst 20), on the bubble's clock, the scopes' buckets this
// process's own or in a store. After its first answer it sends nothing
// the server refuses, and 25 calls take exactly the ideal: 5 at once,
// then one every 6 s, (25 − 5) × 6 s = 120 s (the criterion allows 1.02
// × that), however many workers send them. Up to 15 at once: a call waits
// its turn behind the others in flight, and with more than 20 in flight
// the last one's turn comes the whole 120 s later, which is exactly the
// client's default wait budget (DefaultTotalWaitCap): the order in which
// waiters wake could then leave it a turn short of its budget.
func TestRatewiseClientIsNeverRefusedAfterItsFirstAnswer(t *testing.T) {
	for _, shared := range []bool{false, true} {
		for _, workers := range []int{1, 5, 15} {
			synctest.Test(t, func(t *testing.T) {
				ip, global := adrPerIP(), adrGlobal()
				if shared {
					store := ratewise.NewMemoryStore()
					ip.Store, global.Store = store, store
				}
				h := newHandler(t, WithLimit(ip), WithLimit(global))
				srv := &inProcess{h: h, remote: "192.0.2.7:40000"}
				tr := ratewise.New(srv)
				start := time.Now()
				batch(t, tr, 25, workers)
				elapsed := time.Since(start)
				if n := srv.refusals(); n != 0 {
					t.Errorf("shared %v, %d workers: the server refused %d requests, want none", shared, workers, n)
				}
				if len(srv.statuses) != 25 {
					t.Errorf("shared %v, %d workers: the server answered %d requests, want 25", shared, workers, len(srv.statuses))
				}
				const ideal = 120 * time.Second
				if elapsed != ideal {
					t.Errorf("shared %v, %d workers: 25 calls took %v, want exactly %v (at most %v)", shared, workers, elapsed, ideal, ideal*102/100)
				}
			})
		}
	}
}
