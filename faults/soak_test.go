package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
)

// soakFor runs TestSoakUnderToxics for a set time instead of its short
// default: go test -run TestSoakUnderToxics -soak=10m .
var soakFor = flag.Duration("soak", 0, "run TestSoakUnderToxics for this long (such as 10m) instead of its short default")

// soakSeed replays a run's draws of toxics and calls.
var soakSeed = flag.Uint64("soak.seed", 0, "the seed of TestSoakUnderToxics; 0 draws one")

// The soak's shape: its default run is a few seconds of `make test`.
const (
	soakDefault  = 4 * time.Second
	soakWorkers  = 32
	soakDeadline = 3 * time.Second
	// The told limit each target's host is shared under, by two replicas.
	soakRate    = 100
	soakBurst   = 10
	soakMaxWait = time.Second
)

// httpToxics are the toxics the soak puts between ratewise and its HTTP
// servers.
var httpToxics = []toxic{
	{Type: "latency", Attributes: map[string]any{"latency": 100, "jitter": 50}},
	{Type: "bandwidth", Attributes: map[string]any{"rate": 64}},
	{Type: "slow_close", Attributes: map[string]any{"delay": 300}},
	{Type: "timeout", Attributes: map[string]any{"timeout": 0}},
	{Type: "reset_peer", Attributes: map[string]any{"timeout": 0}},
	{Type: "slicer", Attributes: map[string]any{"average_size": 64, "size_variation": 32, "delay": 200}},
	{Type: "limit_data", Attributes: map[string]any{"bytes": 10}},
	{Type: "limit_data", Attributes: map[string]any{"bytes": 16000}},
}

// soakProxy is one proxy the soak breaks: its toxics to draw from, the one
// it carries now, and when it last carried none.
type soakProxy struct {
	name   string
	p      *proxy
	toxics []toxic
	on     *toxic
	clean  []span // the spans it carried no toxic
	since  time.Time
}

type span struct{ from, to time.Time }

// TestSoakUnderToxics drives 32 goroutines calling two servers (HTTP/1.1
// and HTTP/2) through ratewise, two replicas per server sharing a told
// limit, a breaker and pauses through a redis store, while toxics go on
// and off at random on the three proxies (both servers' and Redis's). It
// checks, over the whole run: every call ends within its deadline and a
// second; every body a call got whole is the one served, and a cut one
// is a read error; every body the servers read whole is one sent, and a
// POST without a key is read at most once; what the replicas sent while
// Redis carried no toxic holds the shared limit; the outages are counted
// and logged once each; a breaker trip made before the run is still in
// Redis after it; and no goroutine is left (TestMain).
func TestSoakUnderToxics(t *testing.T) {
	run := soakDefault
	if *soakFor > 0 {
		run = *soakFor
	}
	seed := *soakSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("soak seed %d (replay with -soak.seed=%d), %v", seed, seed, run)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	var rngMu sync.Mutex
	draw := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}

	f := startFleet(t)
	// The trip that must outlast the run: a breaker whose cooldown does.
	tripPolicy := ratewise.BreakerPolicy{ConsecutiveFailures: 3, Cooldown: run + time.Minute, FailFast: true}
	tripper := func() *http.Client {
		base := http.DefaultTransport.(*http.Transport).Clone()
		t.Cleanup(base.CloseIdleConnections)
		return &http.Client{Transport: ratewise.New(base, ratewise.WithStore(f.store), ratewise.WithBreaker(tripPolicy))}
	}
	down, _ := http.NewRequest(http.MethodGet, f.down.URL, nil)
	c := tripper()
	for i := 0; do(t, c, down, deadline).err == nil; i++ { // open after its three 503s
		if i == 10 {
			t.Fatal("the breaker of an API answering 503 did not open")
		}
	}

	var targets []*target
	var replicas [][]*http.Client
	proxies := []*soakProxy{{name: "redis", p: f.proxy, toxics: redisToxics}}
	// A breaker that opens and closes within the run, so that toxics
	// that take a host down trip it, and the host comes back.
	breaker := ratewise.BreakerPolicy{ConsecutiveFailures: 5, Cooldown: 300 * time.Millisecond, FailFast: true}
	for _, proto := range protocols {
		tg := startTarget(t, proto)
		targets = append(targets, tg)
		opts := []ratewise.Option{ratewise.WithStore(f.store), ratewise.WithBreaker(breaker),
			ratewise.WithLimit(ratewise.Limit{Rate: soakRate, Burst: soakBurst, MaxWait: soakMaxWait})}
		replicas = append(replicas, []*http.Client{tg.client(opts...), tg.client(opts...)})
		proxies = append(proxies, &soakProxy{name: proto, p: tg.proxy, toxics: httpToxics})
	}
	start := time.Now()
	for _, p := range proxies {
		p.since = start
	}

	var (
		toggles   = map[string]int{}
		sentPosts sync.Map // body hash → whether it carried a key
		mu        sync.Mutex
		outcomes  = map[string]int{}
		problems  []string
	)
	count := func(what string) {
		mu.Lock()
		outcomes[what]++
		mu.Unlock()
	}
	problem := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}

	end := start.Add(run)
	var wg sync.WaitGroup
	wg.Go(func() { // the toxics, on and off
		for time.Now().Before(end) {
			time.Sleep(time.Duration(50+draw(350)) * time.Millisecond)
			p := proxies[draw(len(proxies))]
			now := time.Now()
			if p.on != nil {
				p.p.remove(t, *p.on)
				p.on, p.since = nil, now
				continue
			}
			x := p.toxics[draw(len(p.toxics))]
			x.Stream = streams[draw(len(streams))]
			p.p.add(t, x)
			p.on = &x
			p.clean = append(p.clean, span{p.since, now})
			toggles[p.name+" "+x.String()]++
		}
		for _, p := range proxies {
			if p.on != nil {
				p.p.remove(t, *p.on)
				p.on, p.since = nil, time.Now()
			}
		}
	})
	for w := range soakWorkers {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				k := draw(len(targets))
				tg, c := targets[k], replicas[k][draw(2)]
				if draw(2) == 0 {
					n := 1 + draw(64<<10)
					o := tg.get(t, c, n, soakDeadline)
					switch {
					case o.err == nil && !bytes.Equal(o.body, payload(n)):
						problem("GET of %d bytes over %s: a body of %d bytes that differs", n, tg.proto, len(o.body))
					case o.err == nil:
						count("GET whole")
					case o.readErr:
						count("GET cut, a read error")
					default:
						count("GET " + errorKind(o.err))
					}
					continue
				}
				body := fmt.Appendf(nil, "%d-%d-%d|", seed, w, i)
				body = append(body, payload(draw(32<<10))...)
				key := ""
				if draw(2) == 0 {
					key = fmt.Sprintf("key-%d-%d", w, i)
				}
				sentPosts.Store(sha256.Sum256(body), key != "")
				o := tg.post(t, c, body, key, soakDeadline)
				sum := sha256.Sum256(body)
				switch {
				case o.err == nil && o.status == http.StatusOK && !bytes.Equal(o.body, sum[:]):
					problem("POST over %s: the server read a body other than the one sent", tg.proto)
				case o.err == nil:
					count(fmt.Sprintf("POST %d", o.status))
				case o.readErr:
					count("POST cut, a read error")
				default:
					count("POST " + errorKind(o.err))
				}
			}
		})
	}
	wg.Wait()

	// Redis without toxics: the store finds it back within Recheck.
	time.Sleep(recheck + redisTimeout)
	var open *ratewise.CircuitOpenError
	if o := do(t, tripper(), down, deadline); !errors.As(o.err, &open) {
		problem("after the run, the breaker tripped before it is not open in Redis: status %d, error %v", o.status, o.err)
	}
	// A last call per target, so that the store notes Redis's return.
	for k, tg := range targets {
		tg.get(t, replicas[k][0], 1, soakDeadline)
	}

	// What the servers read.
	var bodiesRead int
	for _, tg := range targets {
		tg.received.mu.Lock()
		for h, n := range tg.received.whole {
			bodiesRead += n
			keyed, ok := sentPosts.Load(h)
			switch {
			case !ok:
				problem("the %s server read whole a body nobody sent", tg.proto)
			case !keyed.(bool) && n > 1:
				problem("the %s server read a POST without a key %d times", tg.proto, n)
			}
		}
		tg.received.mu.Unlock()
	}
	// The shared limit, while Redis carried no toxic and the store had
	// it: what the replicas sent held the fleet's limit once the turns
	// given before were spent. A turn is spent within MaxWait of being
	// given, and reaches its replica within the store's Timeout of when
	// Redis gave it, on its clock: a toxic that slows Redis's answers
	// without failing them (bandwidth, slicer) delivers the turns given
	// just before it comes off just after, beside those Redis gives
	// then, and the replicas' own buckets gave turns during the last
	// outage. So a span starts that long after the toxic came off, and
	// after the store found Redis back.
	settle := soakMaxWait + redisTimeout
	redis := proxies[0]
	redis.clean = append(redis.clean, span{redis.since, time.Now()})
	var spansChecked int
	for _, clean := range redis.clean {
		for _, s := range f.log.upWithin(clean.from.Add(settle), clean.to, settle) {
			if s.to.Sub(s.from) < 100*time.Millisecond {
				continue
			}
			spansChecked++
			for _, tg := range targets {
				if n, most := tg.sent.between(s.from, s.to), soakBurst+int(soakRate*s.to.Sub(s.from).Seconds()+0.999); n > most {
					problem("%s: %d requests sent in %v with Redis reachable, past the shared limit's %d", tg.proto, n, s.to.Sub(s.from).Round(time.Millisecond), most)
				}
			}
		}
	}
	outages := f.store.Outages()
	if down, up := f.log.down.Load(), f.log.up.Load(); down != outages || up != outages {
		problem("%d outages counted, %d logged as begun and %d as ended; want each once", outages, down, up)
	}

	calls := 0
	for _, n := range outcomes {
		calls += n
	}
	var lines []string
	for what, n := range outcomes {
		lines = append(lines, fmt.Sprintf("%s %d", what, n))
	}
	slices.Sort(lines)
	var toxicLines []string
	for what, n := range toggles {
		toxicLines = append(toxicLines, fmt.Sprintf("%s %d", what, n))
	}
	slices.Sort(toxicLines)
	t.Logf("%d calls in %v: %s", calls, time.Since(start).Round(time.Millisecond), strings.Join(lines, ", "))
	t.Logf("toxics turned on: %s", strings.Join(toxicLines, ", "))
	t.Logf("%d whole bodies read by the servers, all sent; %d Redis outages, each logged once; %d spans with Redis reachable held the shared limit",
		bodiesRead, outages, spansChecked)
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more", len(problems)-20)
			break
		}
		t.Error(p)
	}
	if calls == 0 {
		t.Error("no call ended")
	}
}

// errorKind names a call's error by what the caller can tell of it.
func errorKind(err error) string {
	var open *ratewise.CircuitOpenError
	var limit *ratewise.ClientLimitError
	switch {
	case errors.As(err, &open):
		return "refused by the open breaker"
	case errors.As(err, &limit):
		return "refused by the limit (" + string(limit.Reason) + ")"
	case errors.Is(err, context.DeadlineExceeded):
		return "past its deadline"
	case errors.Is(err, ratewise.ErrBudgetExhausted):
		return "out of wait budget"
	case errors.Is(err, ratewise.ErrRetryBudgetExhausted):
		return "out of retry budget"
	}
	return "network error"
}
