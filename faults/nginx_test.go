package faults

import (
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ratewise/ratewise"

	"github.com/ratewise/ratewise/bench"
)

// This file puts the toxics between ratewise and nginx's limit_req (20/s,
// burst 5, nodelay), over HTTP/1.1, the third-party limiter the bench
// runs on loopback.

// hostDown are the toxics through which nothing passes.
var hostDown = []string{"timeout", "reset_peer"}

// startNginx starts nginx's limit_req and a proxy in front of it; it
// returns the URL of its file ("ok") through the proxy.
func startNginx(t *testing.T) (*proxy, string) {
	t.Helper()
	var api *bench.API
	for _, a := range bench.APIs() {
		if a.Name == "nginx limit_req nodelay" {
			api = &a
		}
	}
	if api == nil {
		t.Fatal("the bench has no nginx limit_req nodelay")
	}
	srv, err := api.Loopback(bench.Scenario{Rate: 20, Burst: 5})
	if err != nil {
		t.Fatalf("starting nginx (make test installs it): %v", err)
	}
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	u.Host = p.Addr
	return p, u.String() + "/items"
}

// Under each HTTP toxic, in both directions, 4 workers call nginx's
// limit_req through ratewise's defaults for a wait budget of a second:
// every call ends within its deadline and a second; a 200 carries
// nginx's whole file; through a toxic that lets bytes pass, no call ends
// in an error; through one that does not (a black hole, resets, a cut
// before the headers), none gets a 200 and the breaker opens.
func TestNginxLimitReqUnderToxics(t *testing.T) {
	for _, x := range httpToxics {
		for _, stream := range streams {
			x := x
			x.Stream = stream
			name := x.String()
			if x.Type == "limit_data" {
				name = limitDataName(x) + "/" + stream
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				p, target := startNginx(t)
				p.add(t, x)
				down := slices.Contains(hostDown, x.Type) || x.Type == "limit_data" && x.Attributes["bytes"] == 10
				base := http.DefaultTransport.(*http.Transport).Clone()
				base.ResponseHeaderTimeout = 2 * time.Second // far above what the toxics that let bytes pass add
				if down {
					base.ResponseHeaderTimeout = 300 * time.Millisecond // three silent attempts within the deadline
				}
				t.Cleanup(base.CloseIdleConnections)
				var mu sync.Mutex
				var opened bool
				breaker := faultBreaker
				breaker.OnStateChange = func(ch ratewise.BreakerChange) {
					mu.Lock()
					opened = opened || ch.To == ratewise.BreakerOpen
					mu.Unlock()
				}
				c := &http.Client{Transport: ratewise.New(base, ratewise.WithRetry(faultPolicy), ratewise.WithBreaker(breaker))}
				var wg sync.WaitGroup
				var ok, errs int
				for range 4 {
					wg.Go(func() {
						for range 5 {
							req, _ := http.NewRequest(http.MethodGet, target, nil)
							o := do(t, c, req, deadline)
							mu.Lock()
							switch {
							case o.err != nil:
								errs++
							case o.status == http.StatusOK && string(o.body) != "ok":
								t.Errorf("a 200 with the body %q, not nginx's file", o.body)
							case o.status == http.StatusOK:
								ok++
							}
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case down && ok > 0:
					t.Errorf("%d calls got a 200 through %s", ok, x)
				case down && !opened:
					t.Errorf("the breaker did not open through %s", x)
				case !down && errs > 0:
					t.Errorf("%d calls of 20 ended in an error through %s, which lets bytes pass", errs, x)
				case !down && ok == 0:
					t.Errorf("no call got a 200 through %s", x)
				}
			})
		}
	}
}

// limitDataName names a limit_data toxic by where it cuts.
func limitDataName(x toxic) string {
	if x.Attributes["bytes"] == 10 {
		return "limit_data_before_headers"
	}
	return "limit_data_mid_body"
}
