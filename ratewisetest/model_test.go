package ratewisetest

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// call is one request of a schedule and what it should get.
type call struct {
	at         time.Duration // when it is sent, from the bubble's start
	status     int
	remaining  string // X-RateLimit-Remaining
	retryAfter string // "" means none
}

// runSchedule sends calls, one at a time at their times, to a Bucket for
// cfg with PublishHeaders, and checks each answer and the counts. It runs
// inside a synctest bubble, whose clock starts at midnight UTC, so
// clock-aligned windows start with it.
func runSchedule(t *testing.T, cfg Config, calls []call) {
	t.Helper()
	cfg.PublishHeaders = true
	b := NewBucket(cfg)
	start := time.Now()
	var want Stats
	for i, c := range calls {
		wait := time.Until(start.Add(c.at))
		if wait < 0 {
			t.Fatalf("call %d at %v: the schedule went back in time", i+1, c.at)
		}
		time.Sleep(wait)
		status, h, _, err := roundTrip(t, b, context.Background())
		if err != nil {
			t.Fatalf("call %d at %v: %v", i+1, c.at, err)
		}
		got := call{at: c.at, status: status, remaining: h.Get("X-RateLimit-Remaining"), retryAfter: h.Get("Retry-After")}
		if got != c {
			t.Errorf("call %d at %v = %d, remaining %q, Retry-After %q; want %d, %q, %q",
				i+1, c.at, got.status, got.remaining, got.retryAfter, c.status, c.remaining, c.retryAfter)
		}
		want.Received++
		if c.status == http.StatusOK {
			want.Admitted++
		} else {
			want.Limited++
		}
	}
	if got := b.Stats(); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestBucketModels(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		give  Config
		calls []call
	}{
		{
			name: "token bucket",
			give: Config{Rate: 2, Burst: 2},
			calls: []call{
				{0, 200, "1", ""}, {0, 200, "0", ""}, {0, 429, "0", "1"},
				{500 * ms, 200, "0", ""},
				{1500 * ms, 200, "1", ""},
			},
		},
		{
			// nginx's burst=2 nodelay at 2r/s: three at once, then one per
			// 500ms, and the bucket is whole again 1.5s after it emptied.
			name: "leaky bucket, no delay",
			give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, NoDelay: true},
			calls: []call{
				{0, 200, "2", ""}, {0, 200, "1", ""}, {0, 200, "0", ""}, {0, 429, "0", "1"},
				{250 * ms, 429, "0", "1"},
				{500 * ms, 200, "0", ""}, {500 * ms, 429, "0", "1"},
				{2 * time.Second, 200, "2", ""},
			},
		},
		{
			// nginx's default burst of 0: one per 1/rate, nothing queued.
			name: "leaky bucket, no burst",
			give: Config{Model: LeakyBucket, Rate: 4, RefusalStatus: 503},
			calls: []call{
				{0, 200, "0", ""}, {0, 503, "0", "1"},
				{249 * ms, 503, "0", "1"},
				{250 * ms, 200, "0", ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runSchedule(t, tt.give, tt.calls) })
		})
	}
}

// answer is when a request was sent and answered, from the bubble's
// start, and with what status.
type answer struct {
	sent, answered time.Duration
	status         int
}

// sendAt sends a request to rt at each of the times ats, from the
// bubble's start, each from its own goroutine, and returns the answers
// sorted.
func sendAt(t *testing.T, rt http.RoundTripper, ats ...time.Duration) []answer {
	t.Helper()
	var (
		start = time.Now()
		mu    sync.Mutex
		got   []answer
		wg    sync.WaitGroup
	)
	for _, at := range ats {
		wg.Go(func() {
			time.Sleep(at)
			status, _, _, err := roundTrip(t, rt, context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			got = append(got, answer{at, time.Since(start), status})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b answer) int {
		return cmp.Or(cmp.Compare(a.sent, b.sent), cmp.Compare(a.answered, b.answered), cmp.Compare(a.status, b.status))
	})
	return got
}

func TestLeakyBucketQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// nginx's burst=2 at 2r/s: of five at once, one is answered at
		// once, two wait their turn 500ms apart, and two are refused at
		// once. At 250ms the excess is 2.5 with one more, so it is refused;
		// at 500ms it is 2, so one more is queued, behind the one answered
		// at 1s. By 2s the queue has drained: three of four pass.
		const ms = time.Millisecond
		b := NewBucket(Config{Model: LeakyBucket, Rate: 2, Burst: 2})
		got := sendAt(t, b, 0, 0, 0, 0, 0, 250*ms, 500*ms, 2000*ms, 2000*ms, 2000*ms, 2000*ms)
		want := []answer{
			{0, 0, 200}, {0, 0, 429}, {0, 0, 429}, {0, 500 * ms, 200}, {0, 1000 * ms, 200},
			{250 * ms, 250 * ms, 429},
			{500 * ms, 1500 * ms, 200},
			{2000 * ms, 2000 * ms, 200}, {2000 * ms, 2000 * ms, 429}, {2000 * ms, 2500 * ms, 200}, {2000 * ms, 3000 * ms, 200},
		}
		if !slices.Equal(got, want) {
			t.Errorf("answers (sent, answered, status) = %v, want %v", got, want)
		}
		if got, want := b.Stats(), (Stats{Received: 11, Admitted: 7, Limited: 4}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	})
}

func TestLeakyBucketQueuedRequestAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{Model: LeakyBucket, Rate: 1, Burst: 1})
		start := time.Now()
		if _, _, _, err := roundTrip(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, _, _, err := roundTrip(t, b, ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled while queued: err = %v, want the context's", err)
		}
		if took := time.Since(start); took != 300*time.Millisecond {
			t.Errorf("cancelled while queued after %v, want 300ms", took)
		}
		// It keeps its place in the excess, as in nginx: the queue is full
		// until 1s, and the one admitted then is answered at 2s.
		if status, _, _, err := roundTrip(t, b, context.Background()); err != nil || status != 429 {
			t.Errorf("next at 300ms = %d, %v; want 429: the queue holds the abandoned request", status, err)
		}
		time.Sleep(700 * time.Millisecond)
		if status, _, _, err := roundTrip(t, b, context.Background()); err != nil || status != 200 {
			t.Errorf("next at 1s = %d, %v; want 200", status, err)
		}
		if took := time.Since(start); took != 2*time.Second {
			t.Errorf("the one sent at 1s was answered at %v, want 2s", took)
		}
		if got, want := b.Stats(), (Stats{Received: 4, Admitted: 2, Limited: 1}); got != want {
			t.Errorf("Stats() = %+v, want %+v (the abandoned one only received)", got, want)
		}
	})
}

func TestIdeal(t *testing.T) {
	tests := []struct {
		give  Config
		calls int
		want  time.Duration
	}{
		{give: Config{}, calls: 100, want: 0},
		{give: Config{Rate: 2, Burst: 5}, calls: 25, want: 10 * time.Second},
		{give: Config{Rate: 2, Burst: 5}, calls: 5, want: 0},
		{give: Config{Rate: 4}, calls: 3, want: 500 * time.Millisecond}, // Burst 0 means 1
		{give: Config{Rate: 3}, calls: 2, want: 333333334},              // rounded up
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, NoDelay: true}, calls: 9, want: 3 * time.Second},
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, NoDelay: true}, calls: 3, want: 0},
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 2}, calls: 9, want: 4 * time.Second},
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 2}, calls: 1, want: 0},
		{give: Config{Model: FixedWindow, Limit: 10, Window: time.Minute}, calls: 25, want: 2 * time.Minute},
		{give: Config{Model: FixedWindow, Limit: 10, Window: time.Minute}, calls: 10, want: 0},
		{give: Config{Model: FixedWindow, Limit: 10, Window: time.Minute}, calls: 11, want: time.Minute},
		{give: Config{Model: FixedWindowFromFirst, Limit: 10, Window: time.Minute}, calls: 30, want: 2 * time.Minute},
		{give: Config{Model: SlidingWindow, Limit: 10, Window: 10 * time.Second}, calls: 10, want: 0},
		{give: Config{Model: SlidingWindow, Limit: 10, Window: 10 * time.Second}, calls: 11, want: 10 * time.Second},
		{give: Config{Model: SlidingWindow, Limit: 10, Window: 10 * time.Second}, calls: 31, want: 30 * time.Second},
		{give: Config{Model: SlidingWindow, Limit: 3, Window: time.Second}, calls: 5, want: 1333333334},
		{give: Config{Model: FixedWindow, Limit: 1, Window: time.Hour}, calls: 1 << 40, want: 1<<63 - 1}, // saturated
		{give: Config{Model: ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond}, calls: 300, want: 3 * time.Second},
		{give: Config{Model: ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond}, calls: 301, want: 3050 * time.Millisecond},
		{give: Config{Model: ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond}, calls: 1, want: 50 * time.Millisecond},
		{give: Config{Model: ConcurrencyCap, Limit: 5}, calls: 300, want: 0},
		{give: Config{Model: LoadShed, Shed: 0.5}, calls: 100, want: 0},
		{give: Config{Model: LoadShed, Shed: 0.5, ServiceTime: time.Second}, calls: 100, want: time.Second},
		{give: Config{Rate: 2, Burst: 5, ServiceTime: time.Second}, calls: 25, want: 11 * time.Second}, // the last one's service
		{give: Config{ServiceTime: time.Second}, calls: 100, want: time.Second},
		{give: Config{Model: FixedWindow, Limit: 1, Window: time.Hour, ServiceTime: time.Hour}, calls: 1 << 40, want: 1<<63 - 1},
		{give: Config{Rate: 2}, calls: 0, want: 0},
		{give: Config{Model: FixedWindow}, calls: 10, want: 0}, // invalid
	}
	for _, tt := range tests {
		if got := tt.give.Ideal(tt.calls); got != tt.want {
			t.Errorf("%v{Rate: %v, Burst: %d, NoDelay: %v, Limit: %d, Window: %v, ServiceTime: %v}.Ideal(%d) = %v, want %v",
				tt.give.Model, tt.give.Rate, tt.give.Burst, tt.give.NoDelay, tt.give.Limit, tt.give.Window, tt.give.ServiceTime, tt.calls, got, tt.want)
		}
	}
}

// TestIdealIsReached checks Ideal against the model itself: a client that
// sends each request the moment the limit would admit it, as its verdict
// says, takes exactly Ideal, and no less.
func TestIdealIsReached(t *testing.T) {
	tests := []struct {
		give  Config
		calls int
		slack time.Duration // how much later than Ideal the last request may pass
	}{
		{give: Config{Rate: 2, Burst: 5}, calls: 25},
		{give: Config{Rate: 10, Burst: 1}, calls: 7},
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, NoDelay: true}, calls: 9},
		{give: Config{Model: LeakyBucket, Rate: 4}, calls: 9},
		{give: Config{Model: LeakyBucket, Rate: 2, Burst: 3}, calls: 12},
		{give: Config{Model: FixedWindow, Limit: 10, Window: time.Minute}, calls: 25},
		{give: Config{Model: FixedWindowFromFirst, Limit: 3, Window: 10 * time.Second}, calls: 9},
		// Each passes a nanosecond after the weighted count reaches Limit.
		{give: Config{Model: SlidingWindow, Limit: 4, Window: 10 * time.Second}, calls: 13, slack: 1},
		{give: Config{Model: SlidingWindow, Limit: 3, Window: time.Second}, calls: 5},
	}
	for _, tt := range tests {
		t.Run(tt.give.Model.String()+"/"+strconv.Itoa(tt.calls), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newAPI(tt.give)
				start := time.Now()
				var last time.Time
				for admitted := 0; admitted < tt.calls; {
					v, now, _ := a.take("")
					if !v.admitted {
						if v.untilOne <= 0 {
							t.Fatalf("refused at %v with untilOne %v", now.Sub(start), v.untilOne)
						}
						time.Sleep(v.untilOne)
						continue
					}
					admitted++
					last = now.Add(v.delay)
				}
				got, ideal := last.Sub(start), tt.give.Ideal(tt.calls)
				if got < ideal || got > ideal+tt.slack {
					t.Errorf("%d calls took %v, want Ideal() = %v (+%v)", tt.calls, got, ideal, tt.slack)
				}
			})
		})
	}
}
