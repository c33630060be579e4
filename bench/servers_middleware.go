package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

// Each middleware below is set up as its README shows, keyed by the
// client's IP address (one key here: every request comes from
// 127.0.0.1), with its own headers and its own 429 body.

// middlewareAPIs are the third-party Go limiters: a token bucket, a GCRA
// (alone, and with a share of what it admits failing behind it), a
// sliding-window counter, two fixed windows and a concurrency cap.
func middlewareAPIs() []API {
	throttledRefusal := `429, X-RateLimit-Limit: B, X-RateLimit-Remaining: 0, X-RateLimit-Reset (seconds until the bucket is full, rounded up), ` +
		`Retry-After (seconds until one passes, rounded up: 1), body "limit exceeded"`
	const throttledSetup = "RateQuota{MaxRate: PerSec(R), MaxBurst: B − 1} on a memstore, VaryBy RemoteAddr (MaxBurst counts the requests after the first: its X-RateLimit-Limit is MaxBurst + 1)"
	return []API{
		middlewareAPI(API{
			Name:   "didip/tollbooth",
			Module: "github.com/didip/tollbooth/v7",
			Model:  TokenBucket,
			Setup:  "tollbooth.NewLimiter(R, nil).SetBurst(B), a golang.org/x/time/rate bucket per IP and path",
			Refusal: `429, X-Rate-Limit-Limit: R with two decimals ("50.00"), X-Rate-Limit-Duration: 1, RateLimit-Limit: R, RateLimit-Remaining: 0, ` +
				`RateLimit-Reset: 1 (always 1), no Retry-After, text body "You have reached maximum request limit."`,
		}, tollboothLimiter, true),
		middlewareAPI(API{
			Name:    "throttled/throttled",
			Module:  "github.com/throttled/throttled/v2",
			Model:   GCRA,
			Setup:   throttledSetup,
			Refusal: throttledRefusal,
		}, throttledLimiter, true),
		middlewareAPI(API{
			Name:   "throttled/throttled, 5% 503s behind it",
			Module: "github.com/throttled/throttled/v2",
			Model:  GCRA,
			Setup: throttledSetup + "; behind it, 5% of the requests it admits fail with 503, no Retry-After, " +
				"drawn from a seeded stream (they are not refusals: a client that does not retry them fails its call)",
			Refusal: throttledRefusal,
		}, failingThrottled, true),
		middlewareAPI(API{
			Name:   "go-chi/httprate",
			Module: "github.com/go-chi/httprate",
			Model:  SlidingWindow,
			Setup:  "httprate.LimitBy(L, W, client IP), its local counter; windows start when the limiter is made",
			Refusal: `429, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (Unix time of the current fixed window's end), ` +
				`Retry-After: the whole window in seconds, body "Too Many Requests"`,
		}, httprateLimiter, true),
		middlewareAPI(API{
			Name:   "ulule/limiter",
			Module: "github.com/ulule/limiter/v3",
			Model:  FixedWindowFromFirst,
			Setup:  "limiter.Rate{Period: W, Limit: L} on its memory store, its stdlib middleware",
			Refusal: `429, X-RateLimit-Limit, X-RateLimit-Remaining: 0, X-RateLimit-Reset (Unix time of the window's end, whole seconds), ` +
				`no Retry-After, body "Limit exceeded"`,
		}, ululeLimiter, true),
		// go-limiter reads the wall clock through a linkname to time.now,
		// which a testing/synctest bubble does not fake: it runs on
		// loopback only.
		middlewareAPI(API{
			Name:   "sethvargo/go-limiter",
			Module: "github.com/sethvargo/go-limiter",
			Model:  FixedWindow,
			Setup:  "memorystore Tokens: L, Interval: W, httplimit.IPKeyFunc(); its bucket refills whole at each interval from the key's first request, so it counts a fixed window",
			Refusal: `429, X-RateLimit-Limit, X-RateLimit-Remaining: 0, X-RateLimit-Reset and Retry-After as an RFC 1123 date in "UTC" ` +
				`(an HTTP-date says "GMT"), body "Too Many Requests"`,
		}, goLimiterLimiter, false),
		middlewareAPI(API{
			Name:   "go-chi/chi Throttle",
			Module: "github.com/go-chi/chi/v5",
			Model:  ConcurrencyCap,
			Setup: "middleware.Throttle(N), no backlog, around a handler that takes the service time; it caps the requests " +
				"in flight of every client together, and past the cap refuses at once",
			Refusal: `429 at once, no Retry-After (it sends one only when given a RetryAfterFn) nor any rate-limit header, body "Server capacity exceeded."`,
		}, chiThrottle, true),
	}
}

func tollboothLimiter(s Scenario, next http.Handler) (http.Handler, func(), error) {
	lmt := tollbooth.NewLimiter(s.Rate, nil)
	lmt.SetBurst(s.Burst)
	return tollbooth.LimitHandler(lmt, next), noStop, nil
}

func throttledLimiter(s Scenario, next http.Handler) (http.Handler, func(), error) {
	store, err := memstore.NewCtx(65536)
	if err != nil {
		return nil, nil, err
	}
	quota := throttled.RateQuota{MaxRate: throttled.PerSec(int(s.Rate)), MaxBurst: s.Burst - 1}
	rl, err := throttled.NewGCRARateLimiterCtx(store, quota)
	if err != nil {
		return nil, nil, err
	}
	h := &throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
	return h.RateLimit(next), noStop, nil
}

// failShare is the share of the requests throttled admits that fail
// behind it, in "throttled/throttled, 5% 503s behind it".
const failShare = 0.05

// failingThrottled is throttledLimiter with failShare of what it admits
// failing behind it.
func failingThrottled(s Scenario, next http.Handler) (http.Handler, func(), error) {
	return throttledLimiter(s, failing(failShare, next))
}

// failing is next behind which a share of the requests fails with 503,
// no Retry-After (seededFailures).
func failing(share float64, next http.Handler) http.Handler {
	draws := newSeededFailures(share)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draws.next() {
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// seededFailures says which requests fail, a share of them, each drawn
// from a stream of a fixed seed, so that runs repeat.
type seededFailures struct {
	share float64
	mu    sync.Mutex
	draws *rand.Rand // guarded by mu
}

func newSeededFailures(share float64) *seededFailures {
	return &seededFailures{share: share, draws: rand.New(rand.NewPCG(0x5eed, http.StatusServiceUnavailable))}
}

// next reports whether the next request fails.
func (f *seededFailures) next() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draws.Float64() < f.share
}

// chiThrottle is go-chi's Throttle: its throttler needs no goroutine, and
// waits only on channels and a timer, which a testing/synctest bubble
// fakes.
func chiThrottle(s Scenario, next http.Handler) (http.Handler, func(), error) {
	return middleware.Throttle(s.Limit)(next), noStop, nil
}

func httprateLimiter(s Scenario, next http.Handler) (http.Handler, func(), error) {
	byIP := func(r *http.Request) (string, error) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return "", fmt.Errorf("client address %q: %w", r.RemoteAddr, err)
		}
		return httprate.CanonicalizeIP(host), nil
	}
	return httprate.LimitBy(s.Limit, s.Window, byIP)(next), noStop, nil
}

// ululeLimiter leaves out the memory store's cleaner, a goroutine that
// deletes expired counters every 30s and that only a finalizer stops: it
// would outlive the server and keep a testing/synctest bubble from
// ending. The counts are the same without it.
func ululeLimiter(s Scenario, next http.Handler) (http.Handler, func(), error) {
	store := memory.NewStoreWithOptions(ulule.StoreOptions{Prefix: ulule.DefaultPrefix})
	lim := ulule.New(store, ulule.Rate{Period: s.Window, Limit: int64(s.Limit)})
	return stdlib.NewMiddleware(lim).Handler(next), noStop, nil
}

// goLimiterLimiter's stop ends the store's sweeper goroutine.
func goLimiterLimiter(s Scenario, next http.Handler) (http.Handler, func(), error) {
	store, err := memorystore.New(&memorystore.Config{Tokens: uint64(s.Limit), Interval: s.Window})
	if err != nil {
		return nil, nil, err
	}
	mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
	if err != nil {
		return nil, nil, err
	}
	return mw.Handle(next), func() { _ = store.Close(context.Background()) }, nil
}
