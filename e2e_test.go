package ratewise

import (
	"net/http"
	"sync"
	"testing"

	"github.com/ratewise/ratewise/ratewisetest"
)

// TestEndToEndAgainstRateLimitedServer runs the whole stack on loopback,
// in real time: 200 calls from 20 goroutines against a server that admits
// 250 a second. It takes under a second, the time the limit asks for.
func TestEndToEndAgainstRateLimitedServer(t *testing.T) {
	srv := ratewisetest.NewServer(ratewisetest.Config{Rate: 250, Burst: 10})
	defer srv.Close()
	base := srv.Client().Transport
	// A tenth under the server's limit: two clocks a few ms apart, on a
	// loaded machine, would otherwise see one bucket a token ahead.
	tr := New(base,
		WithLimit(Limit{Rate: 225, Burst: 5}),
		WithBreaker(BreakerPolicy{}))
	defer tr.CloseIdleConnections()

	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 20 {
		wg.Go(func() {
			for range 10 {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/items", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Errorf("RoundTrip: %v", err)
					return
				}
				readAll(t, resp)
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if statuses[200] != 200 {
		t.Errorf("statuses = %v, want 200 successes", statuses)
	}
	st := srv.Stats()
	t.Logf("server: %+v", st)
	if st.Admitted != 200 || st.Limited > 10 {
		t.Errorf("server stats = %+v, want 200 admitted and hardly any refusals", st)
	}
}
