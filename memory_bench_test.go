package ratewise

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// The memory benchmarks: one op is a whole run of memCalls calls over
// memKeys hosts through every per-key layer, sampling the live heap as it
// goes, to show that per-key state stays bounded.

const (
	memCalls       = 1_000_000
	memKeys        = 100_000
	memWorkers     = 16
	memSampleEvery = 50_000
	// memBytesPerKey is about what one live key costs over every layer
	// (limit, breaker, key strings, map slots), measured at ~950 B with
	// go1.26 on amd64; the leak bounds below are multiples of it.
	memBytesPerKey = 1000
)

func BenchmarkMemoryDefaultIdle(b *testing.B) { benchMemory(b, 0) }

func BenchmarkMemoryShortIdle(b *testing.B) { benchMemory(b, 20*time.Millisecond) }

// memResult is what one run measured.
type memResult struct {
	base, peak, end int64 // live heap, bytes
	peakKeys        int   // most keys one layer held at a sample
	keys            int   // distinct keys held by any layer at the end
	limitKeys       int
	breakerKeys     int
	cooldownKeys    int
	budgetKeys      int // the retry budget's hosts, kept DefaultIdleTimeout whatever the policies say
	errors          int64
}

func benchMemory(b *testing.B, idle time.Duration) {
	calls, keys := memCalls, memKeys
	if testing.Short() { // for -race
		calls, keys = calls/10, keys/10
	}
	b.ReportAllocs()
	var r memResult
	for b.Loop() {
		r = runMemory(b, calls, keys, idle)
		checkMemory(b, r, keys, idle)
	}
	b.ReportMetric(float64(r.peak), "peak-live-B")
	b.ReportMetric(float64(r.end), "end-live-B")
	b.ReportMetric(float64(r.end-r.base)/float64(max(r.keys, 1)), "B/key")
	b.ReportMetric(float64(r.keys), "keys-held")
	b.ReportMetric(float64(r.peakKeys), "peak-keys")
	b.ReportMetric(float64(r.limitKeys), "limit-keys")
	b.ReportMetric(float64(r.breakerKeys), "breaker-keys")
	b.ReportMetric(float64(r.cooldownKeys), "cooldown-keys")
	b.ReportMetric(float64(r.budgetKeys), "retrybudget-keys")
	b.ReportMetric(float64(r.errors), "errors")
}

// checkMemory fails the benchmark on a leak, with generous bounds.
func checkMemory(b *testing.B, r memResult, keys int, idle time.Duration) {
	b.Helper()
	if ceiling := int64(2 * keys * memBytesPerKey); r.peak-r.base > ceiling {
		b.Fatalf("peak live heap grew by %d B, over %d B (2 × %d keys × %d B)", r.peak-r.base, ceiling, keys, memBytesPerKey)
	}
	if idle == 0 {
		return
	}
	// Short idle: what is left must be a small fraction of the keys. The
	// retry budget is left out: it has no IdleTimeout to shorten.
	for _, l := range []struct {
		name string
		n    int
	}{{"limit", r.limitKeys}, {"breaker", r.breakerKeys}, {"cooldown", r.cooldownKeys}} {
		if l.n >= keys/10 {
			b.Fatalf("%s holds %d keys after idling, not under 10%% of %d", l.name, l.n, keys)
		}
	}
	if ceiling := int64(keys / 10 * memBytesPerKey); r.end-r.base > ceiling {
		b.Fatalf("live heap after idling is %d B over the start, not under %d B (10%% of the keys' worth)", r.end-r.base, ceiling)
	}
}

// liveHeap collects garbage and returns the live heap.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func runMemory(b *testing.B, calls, keys int, idle time.Duration) memResult {
	base := &memBase{}
	var r memResult
	r.base = liveHeap()
	t := New(base,
		WithLimit(Limit{Rate: rate.Limit(1000), Burst: 10, MaxConcurrent: 4, IdleTimeout: idle}),
		// Tiny backoffs so retries do not sleep; the budget refuses the 2 s hints.
		WithRetry(RetryPolicy{InitialDelay: time.Microsecond, MaxDelay: time.Millisecond, TotalWaitCap: 50 * time.Millisecond}),
		WithPause(PausePolicy{IdleTimeout: idle}),
		WithBreaker(BreakerPolicy{IdleTimeout: idle}),
	)
	held := func() (limit, breaker, cooldown, budget int) {
		return t.scopes()[0].Len(), t.breakers.Len(), t.gate.Len(), t.retryBudgets.Len()
	}
	// Callers hold pause's read lock for a call; a sample stops them all,
	// since garbage allocated during a GC would count as live, and stops
	// the timer so that sampling costs neither time nor allocs.
	var pause sync.RWMutex
	sample := func() {
		pause.Lock()
		defer pause.Unlock()
		b.StopTimer() // safe: the benchmark's goroutine waits in wg.Wait
		defer b.StartTimer()
		l, br, c, bu := held()
		r.peak, r.peakKeys = max(r.peak, liveHeap()), max(r.peakKeys, l, br, c, bu)
	}

	var next, errs atomic.Int64
	var wg sync.WaitGroup
	for range memWorkers {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= calls {
					return
				}
				// Round robin: each key comes back after every other key, the
				// longest gap, so short idle timeouts really evict.
				pause.RLock()
				ok := memCall(b, t, fmt.Sprintf("k%05d.example", n%keys))
				pause.RUnlock()
				if !ok {
					errs.Add(1)
				}
				if (n+1)%memSampleEvery == 0 {
					sample()
				}
			}
		})
	}
	wg.Wait()

	// A process goes on calling: new keys drive the sweeps that evict
	// idle keys, which run only on lookups.
	b.StopTimer()
	settle := max(idle, 10*time.Millisecond)
	for i := range 5 {
		time.Sleep(settle)
		memCall(b, t, fmt.Sprintf("tick%d.example", i))
	}
	r.end = liveHeap()
	r.peak = max(r.peak, r.end)
	r.limitKeys, r.breakerKeys, r.cooldownKeys, r.budgetKeys = held()
	all := make(map[string]bool)
	for _, k := range [][]string{t.scopes()[0].Keys(), t.breakers.Keys(), t.gate.Keys(), t.retryBudgets.Keys()} {
		for _, key := range k {
			all[key] = true
		}
	}
	r.keys = len(all)
	b.StartTimer()

	r.errors = errs.Load()
	if opened, closed := base.opened.Load(), base.closed.Load(); opened != closed {
		b.Fatalf("%d response bodies opened, %d closed", opened, closed)
	}
	if r.errors > int64(calls/100) {
		b.Fatalf("%d of %d calls failed", r.errors, calls)
	}
	return r
}

// memCall makes one call to host and reads and closes the body; it reports
// whether a response came.
func memCall(b *testing.B, t *Transport, host string) bool {
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/v1/items", nil)
	if err != nil {
		b.Error(err)
		return false
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return false // a key paused by a 2 s hint refuses within the budget
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return true
}

// memBase is an in-memory server: 200 with a small body, and by attempt
// count 1% 429 with Retry-After: 0 (retried), 1% 503 (final, a breaker
// failure), and 0.01% 503 with Retry-After: 2, the only kind that pauses a
// key in the pause gate: a paced scope takes hints of a second or less.
type memBase struct {
	attempts, opened, closed atomic.Int64
}

var memPayload = []byte(`{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}]}`)

func (m *memBase) RoundTrip(req *http.Request) (*http.Response, error) {
	n := m.attempts.Add(1)
	status, h := http.StatusOK, http.Header{"Content-Type": {"application/json"}}
	switch {
	case n%10_000 == 5_000:
		status = http.StatusServiceUnavailable
		h.Set("Retry-After", "2")
	case n%100 == 17:
		status = http.StatusTooManyRequests
		h.Set("Retry-After", "0")
	case n%100 == 67:
		status = http.StatusServiceUnavailable
	}
	m.opened.Add(1)
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &memBody{m: m}, ContentLength: int64(len(memPayload)), Request: req,
	}, nil
}

// memBody serves memPayload and counts its first Close.
type memBody struct {
	m      *memBase
	off    int
	closed bool
}

func (b *memBody) Read(p []byte) (int, error) {
	if b.off >= len(memPayload) {
		return 0, io.EOF
	}
	n := copy(p, memPayload[b.off:])
	b.off += n
	return n, nil
}

func (b *memBody) Close() error {
	if !b.closed {
		b.closed = true
		b.m.closed.Add(1)
	}
	return nil
}
