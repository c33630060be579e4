package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ratewise/ratewise/ratewisetest"
)

// The fleet tests start this test binary again as fleet replicas:
// TestMain runs the replica in place of the tests.
func TestMain(m *testing.M) {
	if IsFleetReplica() {
		os.Exit(RunFleetReplica(os.Stdout))
	}
	os.Exit(m.Run())
}

// TestFleetAddsUp runs a fleet of two processes, each contender in turn,
// against a bucket generous enough that no call need fail: the replicas
// make the calls asked between them, none fails, the server received
// every one, and what the contenders with a store share is in Redis, and
// only theirs.
func TestFleetAddsUp(t *testing.T) {
	redis, err := StartRedis()
	if err != nil {
		t.Fatal(err) // `make test` installs redis-server: no skip
	}
	t.Cleanup(redis.Close)
	// Under -race, a replica would sleep a second as it exits (the race
	// detector's atexit_sleep_ms), for nothing: it has printed its report.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	// A slow refill keeps a told bucket's key in Redis (it expires once
	// full again) until the test looks for it.
	s := Scenario{Name: "tiny fleet", Rate: 5, Burst: 40, Workers: 4, Calls: 40, Replicas: 2}
	for _, c := range FleetContenders() {
		t.Run(c.Name, func(t *testing.T) {
			srv := NewLoopback(ratewisetest.Config{Rate: s.Rate, Burst: s.Burst}, s.Workers)
			defer srv.Close()
			r, err := RunFleet(context.Background(), redis.Addr, s, c, srv, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("wall %v, last replica ready %v after the start", r.Wall, r.Late)
			made := 0
			for _, rep := range r.Replicas {
				made += rep.Calls
				if rep.Calls > 0 && (rep.FirstStart == 0 || rep.LastEnd < rep.FirstStart) {
					t.Errorf("a replica's report %+v: its calls end before they start", rep)
				}
			}
			if len(r.Replicas) != 2 || made != s.Calls {
				t.Errorf("RunFleet = %d reports of %d calls in all, want 2 of %d", len(r.Replicas), made, s.Calls)
			}
			if r.Received < s.Calls || r.Failed != 0 || r.Cut || r.Wall <= 0 {
				t.Errorf("RunFleet = %d received, %d failed, cut %v, wall %v; want at least %d received, none failed, not cut, a wall time",
					r.Received, r.Failed, r.Cut, r.Wall, s.Calls)
			}
			rdb := redisClient(redis.Addr)
			defer rdb.Close()
			keys, err := rdb.Keys(context.Background(), "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			shared := slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "ratewise:") })
			if c.Told && c.Store != shared || !c.Store && shared {
				t.Errorf("after %s, Redis holds %q", c.Name, keys)
			}
		})
	}
}

// TestFleetMatchups: the fleet tables cover a bucket and a window of
// four and eight processes, against the third-party servers of each kind
// among others, each with every contender.
func TestFleetMatchups(t *testing.T) {
	servers := map[string][]string{}
	for _, m := range FleetMatchups(Filter{}) {
		if !m.API.Fits(m.Scenario) || m.Scenario.Replicas < 2 || len(m.Contenders) != len(FleetContenders()) {
			t.Errorf("%s against %s: %d contenders", m, m.API.Name, len(m.Contenders))
		}
		servers[m.Scenario.Name] = append(servers[m.Scenario.Name], m.API.Name)
	}
	want := map[string][]string{
		"fleet":          {"throttled/throttled", "didip/tollbooth", "nginx limit_req nodelay"},
		"fleet 8":        {"throttled/throttled", "didip/tollbooth", "nginx limit_req nodelay"},
		"window fleet":   {"go-chi/httprate", "ulule/limiter"},
		"window fleet 8": {"go-chi/httprate", "ulule/limiter"},
	}
	if len(servers) != len(want) {
		t.Errorf("fleet tables of %d scenarios, want %d", len(servers), len(want))
	}
	for s, names := range want {
		for _, name := range names {
			if !slices.Contains(servers[s], name) {
				t.Errorf("%s does not run against %s; it runs against %q", s, name, servers[s])
			}
		}
	}
}
