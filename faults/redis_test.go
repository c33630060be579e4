package faults

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
	rwredis "github.com/ratewise/ratewise/redis"
	"github.com/ratewise/ratewise/redis/redistest"
)

// This file puts the toxics between the redis store and a real
// redis-server, while a fleet of two transports shares a told limit and a
// breaker through it.
//
// These tests run in real time: Redis answers in real time, and the store
// times its calls out and rechecks Redis by the clock. Each phase is a
// fraction of a second; the bounds they assert are counts (requests a
// server received, outages), not durations, but for the deadline of each
// call.

// The fleet's shared limit, and how long each phase of a test runs.
const (
	fleetRate  = 50
	fleetBurst = 5
	phase      = 600 * time.Millisecond
	// redisTimeout bounds each Redis call; recheck is how often a store
	// that found Redis down asks again.
	redisTimeout = 100 * time.Millisecond
	recheck      = 200 * time.Millisecond
	// afterTries is how many phases after a toxic may run before one
	// keeps Redis reachable throughout (TestRedisUnderToxics).
	afterTries = 3
)

// arrivals records when a server received each request.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) note() {
	a.mu.Lock()
	a.at = append(a.at, time.Now())
	a.mu.Unlock()
}

// between counts the arrivals in [from, to].
func (a *arrivals) between(from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, t := range a.at {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

// outageLog counts the store's outage lines, and notes when each came.
type outageLog struct {
	down, up atomic.Int64
	mu       sync.Mutex
	changes  []storeChange
}

// storeChange is a line of the store: Redis lost (up false) or found back.
type storeChange struct {
	at time.Time
	up bool
}

func (l *outageLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *outageLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *outageLog) WithGroup(string) slog.Handler            { return l }
func (l *outageLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "event" {
			switch a.Value.String() {
			case "store_down":
				l.down.Add(1)
				l.note(r.Time, false)
			case "store_up":
				l.up.Add(1)
				l.note(r.Time, true)
			}
		}
		return true
	})
	return nil
}

func (l *outageLog) note(at time.Time, up bool) {
	l.mu.Lock()
	l.changes = append(l.changes, storeChange{at, up})
	l.mu.Unlock()
}

// upWithin returns the parts of [from, to] in which the store had Redis,
// as its lines tell, each begun after settle more: requests a process
// queued by its own bucket during an outage go when their turn comes,
// within their MaxWait, after the outage has ended.
func (l *outageLog) upWithin(from, to time.Time, settle time.Duration) []span {
	l.mu.Lock()
	defer l.mu.Unlock()
	var spans []span
	upSince, up := from, true
	for _, c := range l.changes {
		switch {
		case c.at.After(to):
		case c.up && !up:
			upSince, up = c.at, true
		case !c.up && up:
			if c.at.After(from) {
				spans = append(spans, span{upSince, c.at})
			}
			up = false
		}
	}
	if up {
		spans = append(spans, span{upSince, to})
	}
	var settled []span
	for _, s := range spans {
		s.from = s.from.Add(settle)
		if s.from.Before(from) {
			s.from = from
		}
		if s.to.After(s.from) {
			settled = append(settled, s)
		}
	}
	return settled
}

// fleet is a redis-server behind a proxy, a store on it, and two
// transports (replicas) sharing a told limit and a breaker through it,
// calling an API that answers 200 and one that answers 503.
type fleet struct {
	redis    *redistest.Server
	proxy    *proxy
	store    *rwredis.Store
	log      *outageLog
	replicas []*http.Client
	api      *httptest.Server // answers 200
	down     *httptest.Server // answers 503
	pauser   *httptest.Server // answers 429 with Retry-After: 30 the first time
	paused   atomic.Int64     // requests pauser received
	arrived  *arrivals
}

func startFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{redis: redistest.Start(t), log: &outageLog{}, arrived: &arrivals{}}
	f.proxy = startProxy(t, f.redis.Addr)
	rdb := redistest.ClientOf(f.proxy.Addr)
	t.Cleanup(func() { _ = rdb.Close() })
	f.store = rwredis.New(rdb, rwredis.Options{Timeout: redisTimeout, Recheck: recheck, Logger: slog.New(f.log)})
	f.api = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.arrived.note() }))
	t.Cleanup(f.api.Close)
	f.down = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(f.down.Close)
	f.pauser = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.paused.Add(1) == 1 {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(f.pauser.Close)
	for range 2 {
		f.replicas = append(f.replicas, f.replica(t))
	}
	return f
}

// replica is one more transport of the fleet.
func (f *fleet) replica(t *testing.T) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	tr := ratewise.New(base, ratewise.WithStore(f.store), ratewise.WithRetry(faultPolicy), ratewise.WithBreaker(faultBreaker),
		ratewise.WithLimit(ratewise.Limit{Rate: fleetRate, Burst: fleetBurst, MaxWait: time.Second}))
	return &http.Client{Transport: tr}
}

// run has 4 workers per replica call the API for d, each call with a
// deadline of a second, and returns when the run began and ended.
func (f *fleet) run(t *testing.T, d time.Duration) (from, to time.Time) {
	t.Helper()
	from = time.Now()
	end := from.Add(d)
	var wg sync.WaitGroup
	for _, c := range f.replicas {
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(end) {
					req, _ := http.NewRequest(http.MethodGet, f.api.URL, nil)
					o := do(t, c, req, time.Second)
					var limit *ratewise.ClientLimitError
					if o.err != nil && !errors.As(o.err, &limit) && !errors.Is(o.err, context.DeadlineExceeded) {
						t.Errorf("a call to the API: %v", o.err)
					}
				}
			})
		}
	}
	wg.Wait()
	return from, time.Now()
}

// allowance is the most a bucket of the fleet's limit lets through in
// [from, to].
func allowance(from, to time.Time) int {
	return fleetBurst + int(float64(fleetRate)*to.Sub(from).Seconds()+0.999)
}

// trip opens the shared breaker of the 503 API: three failures, and a
// fresh replica sees it open.
func (f *fleet) trip(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.down.URL, nil)
	for range 3 {
		do(t, f.replicas[0], req, deadline)
	}
	f.wantTripped(t, "after three 503s")
}

// wantTripped asserts that a replica that never called the 503 API finds
// its breaker open: the trip is in Redis.
func (f *fleet) wantTripped(t *testing.T, when string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.down.URL, nil)
	o := do(t, f.replica(t), req, deadline)
	var open *ratewise.CircuitOpenError
	if !errors.As(o.err, &open) {
		t.Errorf("%s: a new replica's call to the tripped API got status %d, error %v; want a *ratewise.CircuitOpenError from the shared breaker", when, o.status, o.err)
	}
}

// pause has the pauser's 429 pause its host for 30 seconds, in Redis.
func (f *fleet) pause(t *testing.T) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.pauser.URL, nil)
	if o := do(t, f.replicas[0], req, deadline); o.status != http.StatusTooManyRequests {
		t.Fatalf("the pauser answered %d, error %v; want its 429", o.status, o.err)
	}
	f.wantPaused(t, "after a 429 with Retry-After: 30")
}

// wantPaused asserts that a replica that never called the pauser finds
// its host paused, and sends it nothing: the pause is in Redis.
func (f *fleet) wantPaused(t *testing.T, when string) {
	t.Helper()
	c := f.replica(t)
	if paused, left := c.Transport.(*ratewise.Transport).Blocking(strings.TrimPrefix(f.pauser.URL, "http://")); !paused || left < 10*time.Second {
		t.Errorf("%s: a new replica sees the pauser's host paused %v for %v; want paused for about 30s", when, paused, left)
	}
	req, _ := http.NewRequest(http.MethodGet, f.pauser.URL, nil)
	do(t, c, req, deadline)
	if n := f.paused.Load(); n != 1 {
		t.Errorf("%s: the paused host received %d requests, want only the one it refused", when, n)
	}
}

// redisToxics are the toxics put between the store and Redis: latency
// spikes past the store's timeout, a trickle, a slow close, a black hole,
// resets, slices, and connections cut mid-script.
var redisToxics = []toxic{
	{Type: "latency", Attributes: map[string]any{"latency": 3 * redisTimeout.Milliseconds(), "jitter": redisTimeout.Milliseconds()}},
	{Type: "bandwidth", Attributes: map[string]any{"rate": 1}},
	{Type: "slow_close", Attributes: map[string]any{"delay": 300}},
	{Type: "timeout", Attributes: map[string]any{"timeout": 0}},
	{Type: "reset_peer", Attributes: map[string]any{"timeout": 0}},
	{Type: "slicer", Attributes: map[string]any{"average_size": 8, "size_variation": 4, "delay": 100}},
	{Type: "limit_data", Attributes: map[string]any{"bytes": 300}},
}

// Under each toxic, in each direction, the fleet's calls all end; the API
// gets at most the local fallback's allowance while the store cannot
// reach Redis, and no more than the shared limit once it can again; a
// trip and a pause Redis acknowledged are still there after; and each
// outage is counted and logged once, its end too.
func TestRedisUnderToxics(t *testing.T) {
	eachRedisToxic(t, func(t *testing.T, f *fleet, x toxic) {
		f.trip(t)
		f.pause(t)

		f.proxy.add(t, x)
		from, to := f.run(t, phase)
		// Under the toxic, each replica may fall back on its own
		// bucket, beside the shared one.
		if n, most := f.arrived.between(from, to), (len(f.replicas)+1)*allowance(from, to); n > most {
			t.Errorf("under the toxic the API got %d requests in %v, past the local fallback's allowance of %d", n, to.Sub(from), most)
		}

		f.proxy.remove(t, x)
		time.Sleep(recheck + redisTimeout) // the store asks Redis again within Recheck
		// A Redis call that a loaded machine holds past the store's
		// timeout begins a new outage, and the replicas fall back on their
		// own buckets, as they should: such a phase says nothing of the
		// shared limit. Run it again, up to afterTries times, until one
		// keeps Redis reachable throughout; if none does, it holds to the
		// fallback's allowance.
		for try := 1; ; try++ {
			outages := f.store.Outages()
			from, to = f.run(t, phase)
			lost := f.store.Outages() - outages
			if lost > 0 && try < afterTries {
				t.Logf("after the toxic, phase %d: %d new outages under the machine's load; running it again", try, lost)
				continue
			}
			most, bound := allowance(from, to), "the shared limit's"
			if lost > 0 {
				most, bound = (len(f.replicas)+1)*most, "the local fallback's allowance of"
				t.Logf("after the toxic, every phase of %d had a new outage", afterTries)
			}
			if n := f.arrived.between(from, to); n > most {
				t.Errorf("after the toxic the API got %d requests in %v, past %s %d", n, to.Sub(from), bound, most)
			}
			break
		}
		f.wantTripped(t, "after the toxic")
		f.wantPaused(t, "after the toxic")

		outages := f.store.Outages()
		if down, up := f.log.down.Load(), f.log.up.Load(); down != outages || up != outages {
			t.Errorf("%d outages counted, %d logged as begun and %d as ended; want each once", outages, down, up)
		}
		t.Logf("%d outages; %d requests to the API", outages, f.arrived.between(time.Time{}, time.Now()))
	})
}

// A Redis restarted empty loses what it held, and nothing else: the calls
// all end, the fleet holds the shared limit again within Recheck, and the
// outage is counted and logged once.
func TestRedisRestartedEmpty(t *testing.T) {
	f := startFleet(t)
	f.run(t, phase/2)
	f.redis.Stop()
	f.run(t, phase/2)
	f.redis.Start()
	time.Sleep(recheck + redisTimeout)
	from, to := f.run(t, phase)
	if n, most := f.arrived.between(from, to), allowance(from, to); n > most {
		t.Errorf("after the restart the API got %d requests in %v, past the shared limit's %d", n, to.Sub(from), most)
	}
	f.trip(t)
	if outages := f.store.Outages(); outages != 1 || f.log.down.Load() != 1 || f.log.up.Load() != 1 {
		t.Errorf("%d outages counted, %d logged as begun and %d as ended; want 1 each", outages, f.log.down.Load(), f.log.up.Load())
	}
}

// admissionReplica is one server of a fleet behind the admission limiter,
// its scope per client IP kept in the fleet's store.
func (f *fleet) admissionReplica(t *testing.T) *admission.Handler {
	t.Helper()
	h, err := admission.New(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		admission.WithLimit(admission.Limit{Name: "ip", Rate: fleetRate, Burst: fleetBurst, Store: f.store}))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// admit has 4 clients per replica, all from one address, knock for d;
// it returns how many were admitted.
func admit(t *testing.T, replicas []*admission.Handler, d time.Duration) (admitted int) {
	t.Helper()
	var n atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for _, h := range replicas {
		for range 4 {
			wg.Go(func() {
				for time.Now().Before(end) {
					req := httptest.NewRequest(http.MethodGet, "http://api.test/items", nil)
					req.RemoteAddr = "198.51.100.7:1234"
					rec := httptest.NewRecorder()
					start := time.Now()
					h.ServeHTTP(rec, req)
					if took := time.Since(start); took > redisTimeout+slack {
						t.Errorf("a request waited %v for its admission, past the store's timeout and %v", took, slack)
					}
					switch rec.Code {
					case http.StatusOK:
						n.Add(1)
					case http.StatusTooManyRequests:
						time.Sleep(5 * time.Millisecond) // a client told to wait does not spin
					default:
						t.Errorf("admission answered %d, want 200 or 429 (the store falls back on local buckets)", rec.Code)
					}
				}
			})
		}
	}
	wg.Wait()
	return int(n.Load())
}

// The admission limiter's shared scopes under each toxic between its store
// and Redis: every request is answered within the store's timeout and a
// second; what a fleet of two admits is at most the local fallback's
// allowance under the toxic, and the shared limit's once the toxic is
// gone.
func TestAdmissionUnderRedisToxics(t *testing.T) {
	eachRedisToxic(t, func(t *testing.T, f *fleet, x toxic) {
		replicas := []*admission.Handler{f.admissionReplica(t), f.admissionReplica(t)}

		f.proxy.add(t, x)
		start := time.Now()
		n := admit(t, replicas, phase)
		if most := (len(replicas) + 1) * allowance(start, time.Now()); n > most {
			t.Errorf("under the toxic the fleet admitted %d, past the local fallback's allowance of %d", n, most)
		}

		f.proxy.remove(t, x)
		time.Sleep(recheck + redisTimeout) // the store asks Redis again within Recheck
		start = time.Now()
		n = admit(t, replicas, phase)
		if most := allowance(start, time.Now()); n > most {
			t.Errorf("after the toxic the fleet admitted %d, past the shared limit's %d", n, most)
		}
	})
}

// eachRedisToxic runs test for each Redis toxic and stream, in parallel,
// each with a fleet of its own; x is not on the proxy yet.
func eachRedisToxic(t *testing.T, test func(t *testing.T, f *fleet, x toxic)) {
	for _, x := range redisToxics {
		for _, stream := range streams {
			x.Stream = stream
			t.Run(x.String(), func(t *testing.T) {
				t.Parallel()
				test(t, startFleet(t), x)
			})
		}
	}
}
