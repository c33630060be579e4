package redis

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
	"github.com/ratewise/ratewise/redis/redistest"
)

// replica is one server of a fleet: an admission Handler whose scopes
// keep their buckets in the Redis at srv, through a store of its own.
func replica(t *testing.T, srv *redistest.Server, opts Options, limits ...admission.Limit) *admission.Handler {
	t.Helper()
	store, _ := newStore(t, srv, opts)
	var options []admission.Option
	for _, l := range limits {
		l.Store = store
		options = append(options, admission.WithLimit(l))
	}
	if opts.Logger != nil {
		options = append(options, admission.WithLogger(opts.Logger))
	}
	h, err := admission.New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), options...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serveFrom(h http.Handler, remote string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, "http://api.test/items", nil)
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// adr-009, criterion "shared by a fleet: three server replicas on one
// Redis, the aggregate admitted rate stays within 2% of the global
// limit". Twelve clients, each with its own address, hammer three
// replicas for two seconds; every replica's scopes (a per-IP one that
// never binds, then the global 100/s, burst 20) keep their buckets in
// the one Redis. What the fleet admits past the burst, over the time
// from its first admission to its last, is the global rate, ±2%; every
// other answer is a 429, and the per-IP buckets got back each token the
// global scope refused after them.
func TestThreeReplicasOnOneRedisHoldTheGlobalLimit(t *testing.T) {
	srv := redistest.Start(t)
	const globalRate, globalBurst = 100, 20
	limits := []admission.Limit{
		{Name: "ip", Rate: 1000, Burst: 100},
		{Name: "global", Rate: globalRate, Burst: globalBurst, Key: ratewise.Global},
	}
	replicas := make([]*admission.Handler, 3)
	for i := range replicas {
		replicas[i] = replica(t, srv, Options{Prefix: "fleet:"}, limits...)
	}
	type result struct {
		admitted, refused, other int
		first, last              time.Time
	}
	results := make([]result, 12)
	start := time.Now()
	end := start.Add(2 * time.Second)
	var wg sync.WaitGroup
	for c := range results {
		wg.Go(func() {
			r := &results[c]
			remote := fmt.Sprintf("198.51.100.%d:4000", c+1)
			for n := 0; time.Now().Before(end); n++ {
				rec := serveFrom(replicas[(c+n)%len(replicas)], remote)
				at := time.Now()
				switch rec.Code {
				case http.StatusOK:
					if r.admitted == 0 {
						r.first = at
					}
					r.admitted++
					r.last = at
				case http.StatusTooManyRequests:
					r.refused++
				default:
					r.other++
				}
			}
		})
	}
	wg.Wait()
	var total result
	for _, r := range results {
		total.admitted += r.admitted
		total.refused += r.refused
		total.other += r.other
		if r.admitted > 0 && (total.first.IsZero() || r.first.Before(total.first)) {
			total.first = r.first
		}
		if r.last.After(total.last) {
			total.last = r.last
		}
	}
	span := total.last.Sub(total.first)
	fleetRate := float64(total.admitted-globalBurst) / span.Seconds()
	t.Logf("admitted %d, refused %d over %v: %.2f a second past the burst", total.admitted, total.refused, span.Round(time.Millisecond), fleetRate)
	if fleetRate < globalRate*0.98 || fleetRate > globalRate*1.02 {
		t.Errorf("the fleet admitted %.2f a second past the burst, want %d ± 2%%", fleetRate, globalRate)
	}
	// Pressed hard: more knocks than the limit admits, a few times over,
	// however slowly a loaded machine runs the clients.
	if total.other != 0 || total.refused < 3*total.admitted {
		t.Errorf("%d answers neither 200 nor 429, %d refused for %d admitted: want none, and the clients to have pressed hard",
			total.other, total.refused, total.admitted)
	}
	// Each client's per-IP bucket lost only what it was admitted for: the
	// global refusals gave theirs back. (1000/s refills a token a
	// millisecond: compare at a tolerance of the time the reads take.)
	for c := range results {
		st := replicas[0].Status(t.Context(), fmt.Sprintf("198.51.100.%d", c+1))
		if ip := st.Scopes[0]; !ip.Shared || ip.Tokens < 95 {
			t.Errorf("client %d's per-IP bucket: %+v; want it full again, the refused turns given back", c+1, ip)
		}
	}
	for i, h := range replicas {
		for _, s := range h.Stats().Scopes {
			if s.StoreOutages != 0 || s.StoreGivesLost != 0 {
				t.Errorf("replica %d, scope %s: %+v; want no outage", i, s.Name, s)
			}
		}
	}
}

// adr-009, criterion "when Redis is down the middleware follows the
// store's policy (fall back to local buckets, or fail closed with 503),
// counted and logged once per outage", against a real Redis stopped and
// started again.
func TestAdmissionWhileRedisIsDown(t *testing.T) {
	for _, policy := range []Failure{FallbackLocal, FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			srv := redistest.Start(t)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			h := replica(t, srv, Options{OnFailure: policy, Recheck: 100 * time.Millisecond, Logger: logger},
				admission.Limit{Name: "ip", Rate: 1, Burst: 3})
			if rec := serveFrom(h, "198.51.100.1:1"); rec.Code != 200 || rec.Header().Get("RateLimit") != `"ip";r=2;t=1` {
				t.Fatalf("with Redis up: %d %q", rec.Code, rec.Header().Get("RateLimit"))
			}
			srv.Stop()
			var codes []int
			for range 5 {
				codes = append(codes, serveFrom(h, "198.51.100.1:1").Code)
			}
			want := "[200 200 200 429 429]" // this process's own bucket, full, stands in
			if policy == FailClosed {
				want = "[503 503 503 503 503]"
			}
			if fmt.Sprint(codes) != want {
				t.Errorf("with Redis down: %v, want %s", codes, want)
			}
			srv.Start()
			time.Sleep(150 * time.Millisecond) // past Recheck
			if rec := serveFrom(h, "198.51.100.1:1"); rec.Code != 200 {
				t.Errorf("with Redis back: %d, want the shared bucket's second token", rec.Code)
			}
			if st := h.Stats().Scopes[0]; st.StoreOutages != 1 {
				t.Errorf("outages counted: %d, want 1", st.StoreOutages)
			}
			out := logs.String()
			if strings.Count(out, "event=admission_store_down") != 1 || strings.Count(out, "event=admission_store_up") != 1 {
				t.Errorf("logs, want one line for the outage and one for its end:\n%s", out)
			}
		})
	}
}
