package ratewisetest

import (
	"bytes"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// api is the fake rate-limited application that both the loopback
// [Server] and the in-process [Bucket] run: a token bucket per key, the
// rate-limit headers, faults and the counts.
type api struct {
	cfg     Config
	burst   int
	faults  []Fault
	handler http.Handler
	policy  string // RateLimit-Policy value, the same on every response

	received, admitted, limited, faulted atomic.Int64

	mu         sync.Mutex
	buckets    map[string]*rate.Limiter // guarded by mu
	arrivals   []time.Time              // guarded by mu
	faultRand  *rand.Rand               // guarded by mu
	jitterRand *rand.Rand               // guarded by mu
}

// newAPI builds the application cfg describes. It panics with the error
// of [Config.Validate] when cfg is invalid.
func newAPI(cfg Config) *api {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	// Own copies, so the caller changing its slice later cannot race us.
	cfg.Faults = slices.Clone(cfg.Faults)
	seed := cfg.Seed
	if seed == 0 {
		seed = defaultSeed
	}
	a := &api{
		cfg:     cfg,
		burst:   cfg.burst(),
		faults:  cfg.faults(),
		handler: cfg.Handler,
		buckets: make(map[string]*rate.Limiter),
		// Separate streams, so changing the jitter does not change which
		// requests get faults.
		faultRand:  rand.New(rand.NewPCG(seed, 1)),
		jitterRand: rand.New(rand.NewPCG(seed, 2)),
	}
	if a.handler == nil {
		a.handler = http.HandlerFunc(okHandler)
	}
	if cfg.Rate > 0 {
		full := fakehttp.CeilSeconds(fromSeconds(float64(a.burst) / cfg.Rate))
		a.policy = `"default";q=` + strconv.Itoa(a.burst) + ";w=" + strconv.FormatInt(max(full, 1), 10)
	}
	return a
}

func (a *api) stats() Stats {
	return Stats{
		Received: int(a.received.Load()),
		Admitted: int(a.admitted.Load()),
		Limited:  int(a.limited.Load()),
		Faults:   int(a.faulted.Load()),
	}
}

func (a *api) arrivalTimes() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.arrivals)
}

// serve answers one request: the latency (waited with sleep, which
// reports whether it was waited out), the bucket, then the handler or a
// fault. A request abandoned during the latency aborts the handler.
func (a *api) serve(w http.ResponseWriter, r *http.Request, sleep func(context.Context, time.Duration) bool) {
	a.received.Add(1)
	if a.cfg.OnRequest != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			// The client went away mid-body: nothing arrived whole.
			panic(http.ErrAbortHandler)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		a.cfg.OnRequest(r, body)
	}
	a.mu.Lock()
	a.arrivals = append(a.arrivals, time.Now())
	jitter := a.drawJitter()
	a.mu.Unlock()

	if !sleep(r.Context(), a.cfg.Latency+jitter) {
		// The client is gone or the server is closing: drop the connection
		// rather than let net/http send an empty 200.
		panic(http.ErrAbortHandler)
	}
	if a.cfg.Rate == 0 {
		a.admit(w, r, sleep)
		return
	}

	var key string
	if a.cfg.KeyHeader != "" {
		key = r.Header.Get(a.cfg.KeyHeader)
	}
	v, now := a.take(key)
	a.setHeaders(w.Header(), v)
	if v.admitted {
		a.admit(w, r, sleep)
		return
	}
	a.limited.Add(1)
	h := w.Header()
	if ra := retryAfter(a.cfg.RetryAfter, now, v.untilOne); ra != "" {
		h.Set("Retry-After", ra)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = io.WriteString(w, limitedBody)
}

// admit answers a request that passed the bucket, with a fault or the
// handler.
func (a *api) admit(w http.ResponseWriter, r *http.Request, sleep func(context.Context, time.Duration) bool) {
	f, ok := a.drawFault()
	if !ok {
		a.admitted.Add(1)
		a.handler.ServeHTTP(w, r)
		return
	}
	a.faulted.Add(1)
	a.answerFault(w, r, f, sleep)
}

// drawJitter returns the extra latency of one request. a.mu must be held.
func (a *api) drawJitter() time.Duration {
	j := int64(a.cfg.LatencyJitter)
	if j <= 0 {
		return 0
	}
	if j < math.MaxInt64 {
		j++ // "up to" includes the bound
	}
	return time.Duration(a.jitterRand.Int64N(j))
}

// drawFault reports whether an admitted request gets a fault, and which.
func (a *api) drawFault() (Fault, bool) {
	if a.cfg.FaultRate == 0 {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.faultRand.Float64() >= a.cfg.FaultRate {
		return 0, false
	}
	return a.faults[a.faultRand.IntN(len(a.faults))], true
}

// verdict is what a bucket said about one request.
type verdict struct {
	admitted  bool
	remaining int           // whole tokens left after the request
	untilOne  time.Duration // until at least one token is available
	untilFull time.Duration // until the bucket is full
}

// take asks the bucket of key for one token, and returns the verdict and
// the time it was made.
func (a *api) take(key string) (verdict, time.Time) {
	// One lock around the whole decision, so the headers describe the same
	// bucket state that admitted or refused the request.
	a.mu.Lock()
	defer a.mu.Unlock()
	lim, ok := a.buckets[key]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(a.cfg.Rate), a.burst)
		a.buckets[key] = lim
	}
	now := time.Now()
	// AllowN takes nothing when it refuses, so a 429 costs no token.
	ok = lim.AllowN(now, 1)
	v := bucketState(lim.TokensAt(now), a.cfg.Rate, a.burst)
	v.admitted = ok
	return v, now
}

// setHeaders adds the configured rate-limit headers for v to h.
func (a *api) setHeaders(h http.Header, v verdict) {
	if a.cfg.PublishHeaders {
		h.Set("X-RateLimit-Limit", strconv.Itoa(a.burst))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(v.remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(fakehttp.CeilSeconds(v.untilFull), 10))
	}
	if a.cfg.IETFHeaders {
		t := v.untilFull
		if v.remaining == 0 {
			t = v.untilOne
		}
		h.Set("RateLimit-Policy", a.policy)
		h.Set("RateLimit", `"default";r=`+strconv.Itoa(v.remaining)+";t="+strconv.FormatInt(fakehttp.CeilSeconds(t), 10))
	}
}
