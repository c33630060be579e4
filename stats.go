package ratewise

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// This file is what the transport counts: for the calls made with one
// context, their CallStats; for the transport, its counters of what every
// call did, kept in atomics so that counting costs a few adds, and read
// with [Transport.Stats].

// CallStats counts what the transport did for the calls made with one
// context: attempts sent, responses read as rate-limited, time spent
// waiting, and the last status received. Get one from [WithCallStats].
// It is safe for concurrent use; its zero value counts nothing yet.
//
// Every call made with the context adds to it, so a redirect followed by
// [http.Client] adds its own attempts. Give each call its own CallStats
// when they must be told apart.
type CallStats struct {
	attempts      atomic.Int64
	rateLimitHits atomic.Int64
	waited        atomic.Int64 // nanoseconds
	lastStatus    atomic.Int64
}

// Attempts returns the number of requests sent to the base RoundTripper.
func (s *CallStats) Attempts() int { return int(s.attempts.Load()) }

// RateLimitHits returns the number of responses read as rate-limited.
func (s *CallStats) RateLimitHits() int { return int(s.rateLimitHits.Load()) }

// Waited returns the time spent waiting before retries, summed.
func (s *CallStats) Waited() time.Duration { return time.Duration(s.waited.Load()) }

// LastStatus returns the status code of the last response received, or 0
// when none was.
func (s *CallStats) LastStatus() int { return int(s.lastStatus.Load()) }

// The recorders below accept a nil receiver: most calls carry no stats.

func (s *CallStats) recordAttempt() {
	if s != nil {
		s.attempts.Add(1)
	}
}

func (s *CallStats) recordResponse(status int, class Class) {
	if s == nil {
		return
	}
	s.lastStatus.Store(int64(status))
	if class.refusal() {
		s.rateLimitHits.Add(1)
	}
}

func (s *CallStats) recordWait(d time.Duration) {
	if s != nil {
		s.waited.Add(int64(d))
	}
}

// StatsMaxKeys is how many keys [Stats.RateLimitHitsByKey] names; the hits
// of further keys are counted under "other", so that memory stays bounded
// however many hosts a transport calls.
const StatsMaxKeys = 100

// waitBuckets are the upper bounds of the wait histogram.
var waitBuckets = [...]time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute}

// WaitBuckets returns the upper bounds of [WaitStats.Buckets]: 0.1 s to
// 60 s.
func WaitBuckets() []time.Duration { return slices.Clone(waitBuckets[:]) }

// counters are a transport's counts.
type counters struct {
	// Calls are counted once, as they end, in succeeded or aborts: every
	// add here is shared by all cores.
	attempts, succeeded, retries, rateLimitHits atomic.Int64
	aborts                                      [len(giveUpReasons)]atomic.Int64
	// retriesByStatus counts retries by the status that caused them;
	// index 0 is a network error.
	retriesByStatus [600]atomic.Int64
	waits           [waitKinds]waitCounter
	lastError       atomic.Pointer[lastError]

	mu        sync.Mutex
	hitsByKey map[string]int64 // guarded by mu; at most StatsMaxKeys keys and "other"
}

type waitCounter struct {
	count, nanos atomic.Int64
	buckets      [len(waitBuckets)]atomic.Int64 // waits up to each bound, not above the one before
}

func (w *waitCounter) record(d time.Duration) {
	w.count.Add(1)
	w.nanos.Add(int64(d))
	for i, bound := range waitBuckets {
		if d <= bound {
			w.buckets[i].Add(1)
			return
		}
	}
}

func (c *counters) recordWait(kind WaitKind, d time.Duration) {
	if int(kind) < len(c.waits) {
		c.waits[kind].record(d)
	}
}

// recordRetry counts a retry after resp, or after a network error.
func (c *counters) recordRetry(resp *http.Response) {
	c.retries.Add(1)
	status := 0
	if resp != nil && resp.StatusCode > 0 && resp.StatusCode < len(c.retriesByStatus) {
		status = resp.StatusCode
	}
	c.retriesByStatus[status].Add(1)
}

// recordRateLimited counts a response read as rate-limited, for key.
func (c *counters) recordRateLimited(key string) {
	c.rateLimitHits.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hitsByKey == nil {
		c.hitsByKey = make(map[string]int64)
	}
	if _, ok := c.hitsByKey[key]; !ok && len(c.hitsByKey) >= StatsMaxKeys {
		key = "other"
	}
	c.hitsByKey[key]++
}

// recordEnd counts a call's end.
func (c *counters) recordEnd(gaveUp GiveUpReason) {
	if gaveUp == "" {
		c.succeeded.Add(1)
	} else if i := slices.Index(giveUpReasons[:], gaveUp); i >= 0 {
		c.aborts[i].Add(1)
	}
}

// retryReason names what a retry followed: its status ("429"), or, for 0,
// a network error.
func retryReason(status int) string {
	if status == 0 {
		return "network error"
	}
	return strconv.Itoa(status)
}

// recordError keeps the last error a call returned, and its request. It is
// redacted when Stats reads it, since only the last one is ever shown: the
// regular expressions cost more than the rest of a failed call. (A request
// changed after its call is redacted as it is then; the patterns still
// catch what looks like a secret.)
func (c *counters) recordError(err error, req *http.Request) {
	c.lastError.Store(&lastError{err: err, req: req})
}

// lastError is an error and its request, redacted once, when first read.
type lastError struct {
	err  error
	req  *http.Request
	once sync.Once
	text string
}

func (e *lastError) String() string {
	e.once.Do(func() { e.text = redactError(e.err, e.req) })
	return e.text
}

// Stats is a snapshot of a transport's counters since it was made. It
// marshals to JSON with durations in seconds, the answer of a
// get_throttle_stats tool.
type Stats struct {
	// Calls counts calls (RoundTrip) that have ended; Attempts the
	// requests sent to the base RoundTripper, and Retries those that were
	// retries.
	Calls    int64 `json:"calls"`
	Attempts int64 `json:"attempts"`
	Retries  int64 `json:"retries"`
	// RateLimitHits counts responses read as rate-limited.
	RateLimitHits int64 `json:"rate_limit_hits"`
	// Succeeded counts calls that ended with the answer they were after (a
	// response the policy does not retry); Aborts the others, by reason,
	// every reason present.
	Succeeded int64                  `json:"succeeded"`
	Aborts    map[GiveUpReason]int64 `json:"aborts"`
	// Waits counts waits of every kind; TotalWait sums them, and
	// AverageWait is TotalWait / Waits.
	Waits       int64         `json:"waits"`
	TotalWait   time.Duration `json:"-"`
	AverageWait time.Duration `json:"-"`
	// LastError is the last error a call returned, with secrets removed;
	// "" when none has.
	LastError string `json:"last_error,omitempty"`
	// RetriesByReason counts retries by the status that caused them
	// ("429", "503") or "network error".
	RetriesByReason map[string]int64 `json:"retries_by_reason,omitempty"`
	// RateLimitHitsByKey counts rate-limited responses by host, for at
	// most StatsMaxKeys hosts, the rest under "other".
	RateLimitHitsByKey map[string]int64 `json:"rate_limit_hits_by_key,omitempty"`
	// WaitsByKind holds the waits of each kind ("backoff", "pacing", ...)
	// that happened.
	WaitsByKind map[string]WaitStats `json:"waits_by_kind,omitempty"`
}

// WaitStats counts the waits of one kind.
type WaitStats struct {
	Count int64         `json:"count"`
	Total time.Duration `json:"-"`
	// Buckets[i] counts the waits of at most WaitBuckets()[i], cumulative
	// as in a Prometheus histogram; Count includes the longer ones.
	Buckets []int64 `json:"buckets"`
}

// MarshalJSON writes the stats with the waits in seconds.
func (s Stats) MarshalJSON() ([]byte, error) {
	type plain Stats
	return json.Marshal(struct {
		plain
		TotalWait   float64 `json:"total_wait_seconds"`
		AverageWait float64 `json:"average_wait_seconds"`
	}{plain(s), s.TotalWait.Seconds(), s.AverageWait.Seconds()})
}

// MarshalJSON writes the waits' total in seconds.
func (w WaitStats) MarshalJSON() ([]byte, error) {
	type plain WaitStats
	return json.Marshal(struct {
		plain
		Total float64 `json:"total_seconds"`
	}{plain(w), w.Total.Seconds()})
}

// Stats returns a snapshot of what the transport did since it was made.
// Counting costs a few atomic adds per call; Stats itself builds maps, so
// call it when asked, not per request.
func (t *Transport) Stats() Stats {
	c := t.counters
	s := Stats{
		Attempts: c.attempts.Load(), Retries: c.retries.Load(),
		RateLimitHits: c.rateLimitHits.Load(), Succeeded: c.succeeded.Load(),
		Aborts: make(map[GiveUpReason]int64, len(giveUpReasons)),
	}
	s.Calls = s.Succeeded
	for i, r := range giveUpReasons {
		s.Aborts[r] = c.aborts[i].Load()
		s.Calls += s.Aborts[r]
	}
	if e := c.lastError.Load(); e != nil {
		s.LastError = e.String()
	}
	for status := range c.retriesByStatus {
		if n := c.retriesByStatus[status].Load(); n > 0 {
			if s.RetriesByReason == nil {
				s.RetriesByReason = make(map[string]int64)
			}
			s.RetriesByReason[retryReason(status)] = n
		}
	}
	c.mu.Lock()
	if len(c.hitsByKey) > 0 {
		s.RateLimitHitsByKey = make(map[string]int64, len(c.hitsByKey))
		for k, n := range c.hitsByKey {
			s.RateLimitHitsByKey[k] = n
		}
	}
	c.mu.Unlock()
	for kind := range c.waits {
		w := &c.waits[kind]
		// The buckets before the count: a wait is counted before it is put
		// in its bucket, so no bucket can show more than the count.
		buckets := make([]int64, len(waitBuckets))
		var cumulative int64
		for i := range w.buckets {
			cumulative += w.buckets[i].Load()
			buckets[i] = cumulative
		}
		n := w.count.Load()
		if n == 0 {
			continue
		}
		ws := WaitStats{Count: n, Total: time.Duration(w.nanos.Load()), Buckets: buckets}
		if s.WaitsByKind == nil {
			s.WaitsByKind = make(map[string]WaitStats)
		}
		s.WaitsByKind[WaitKind(kind).String()] = ws
		s.Waits += n
		s.TotalWait += ws.Total
	}
	if s.Waits > 0 {
		s.AverageWait = s.TotalWait / time.Duration(s.Waits)
	}
	return s
}
