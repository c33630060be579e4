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
)

// api is the fake rate-limited application that both the loopback
// [Server] and the in-process [Bucket] run: the limit of Config.Model per
// key, the rate-limit headers, faults and the counts.
type api struct {
	cfg           Config
	faults        []Fault
	handler       http.Handler
	newKey        func() keyLimit // nil without a limit
	quota         string          // X-RateLimit-Limit value
	policy        string          // RateLimit-Policy value, the same on every response
	refusalStatus int
	refusalPage   string // body of an HTMLRefusal

	received, admitted, limited, faulted atomic.Int64

	mu         sync.Mutex
	keys       map[string]keyLimit // guarded by mu
	arrivals   []time.Time         // guarded by mu
	faultRand  *rand.Rand          // guarded by mu
	jitterRand *rand.Rand          // guarded by mu
}

// newAPI builds the application cfg describes. It panics with the error
// of [Config.Validate] when cfg is invalid.
func newAPI(cfg Config) *api {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	// Own copies, so the caller changing its slice later cannot race us.
	cfg.Faults = slices.Clone(cfg.Faults)
	seed := cfg.seed()
	a := &api{
		cfg:           cfg,
		faults:        cfg.faults(),
		handler:       cfg.Handler,
		refusalStatus: cfg.refusalStatus(),
		keys:          make(map[string]keyLimit),
		// Separate streams, so changing the jitter does not change which
		// requests get faults.
		faultRand:  rand.New(rand.NewPCG(seed, 1)),
		jitterRand: rand.New(rand.NewPCG(seed, 2)),
	}
	if a.handler == nil {
		a.handler = http.HandlerFunc(okHandler)
	}
	if cfg.limited() {
		a.newKey = newKeyLimit(cfg)
		if cfg.Model.metered() {
			a.quota = strconv.Itoa(quota(cfg))
			a.policy = policy(cfg)
		}
		if cfg.HTMLRefusal {
			a.refusalPage = refusalPage(a.refusalStatus)
		}
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
// reports whether it was waited out), the limit and any wait in its
// queue, the service time, then the handler or a fault. A request
// abandoned during the latency, the queue or the service time aborts the
// handler. A ConcurrencyCap place is held until serve returns.
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
	if a.newKey == nil {
		a.admit(w, r, sleep)
		return
	}

	var key string
	if a.cfg.KeyHeader != "" {
		key = r.Header.Get(a.cfg.KeyHeader)
	}
	v, now, lim := a.take(key)
	if !v.admitted {
		a.limited.Add(1)
		a.refuse(w, v, now)
		return
	}
	if h, ok := lim.(holder); ok {
		defer a.release(h) // a panic that drops the request frees it too
	}
	a.setHeaders(w.Header(), v, now)
	if v.delay > 0 && !sleep(r.Context(), v.delay) {
		panic(http.ErrAbortHandler) // gone while queued, as during the latency
	}
	a.admit(w, r, sleep)
}

// admit answers a request that passed the limit, after its service time,
// with a fault or the handler.
func (a *api) admit(w http.ResponseWriter, r *http.Request, sleep func(context.Context, time.Duration) bool) {
	if !sleep(r.Context(), a.cfg.ServiceTime) {
		panic(http.ErrAbortHandler) // gone while served, as during the latency
	}
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

// take asks the limit of key about one request, and returns the verdict,
// the time it was made and the key's state.
func (a *api) take(key string) (verdict, time.Time, keyLimit) {
	// One lock around the whole decision, so the headers describe the same
	// state that admitted or refused the request.
	a.mu.Lock()
	defer a.mu.Unlock()
	lim, ok := a.keys[key]
	if !ok {
		lim = a.newKey()
		a.keys[key] = lim
	}
	// The wall clock alone: the headers name wall-clock times (a Unix
	// reset), and a wait measured on the monotonic clock added to the
	// wall clock's now drifts past a window's end by the nanoseconds the
	// two clocks part, which ResetUnix rounds up to a whole second.
	now := time.Now().Round(0)
	return lim.take(now), now, lim
}

// release gives back what an admitted request held in h.
func (a *api) release(h holder) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h.release()
}
