package ratewisetest

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// nth sends n requests to a Bucket for cfg, the first after waiting
// after from the bubble's start, and returns the last one's answer. It
// runs inside a synctest bubble, whose clock starts at midnight UTC on
// 2000-01-01 (Unix time 946684800).
func nth(t *testing.T, cfg Config, after time.Duration, n int) result {
	t.Helper()
	b := NewBucket(cfg)
	time.Sleep(after)
	var r result
	for range n {
		status, h, body, err := roundTrip(t, b, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		r = result{status: status, header: h, body: body}
	}
	return r
}

// wantHeaders checks the headers of r; "" means absent.
func wantHeaders(t *testing.T, r result, want map[string]string) {
	t.Helper()
	for name, w := range want {
		if got := r.header.Get(name); got != w {
			t.Errorf("%s = %q, want %q", name, got, w)
		}
	}
}

func TestModelHeaders(t *testing.T) {
	const (
		ms    = time.Millisecond
		epoch = 946684800 // the bubble's start in Unix time
	)
	tests := []struct {
		name  string
		give  Config
		after time.Duration // before the first request
		n     int           // requests; the last one's headers are checked
		want  map[string]string
	}{
		{
			name: "token bucket, unix reset when full",
			give: Config{Rate: 2, Burst: 3, PublishHeaders: true, Reset: ResetUnix},
			n:    1,
			want: map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "946684801"},
		},
		{
			name: "token bucket, duration reset",
			give: Config{Rate: 2, Burst: 3, PublishHeaders: true, Reset: ResetDuration},
			n:    1,
			want: map[string]string{"X-RateLimit-Reset": "500ms"},
		},
		{
			name: "token bucket, duration reset rounded up to the millisecond",
			give: Config{Rate: 3, Burst: 3, PublishHeaders: true, Reset: ResetDuration},
			n:    2,
			want: map[string]string{"X-RateLimit-Reset": "667ms"},
		},
		{
			name: "leaky bucket with NoDelay counts the one the rate allows",
			give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, NoDelay: true, PublishHeaders: true, IETFHeaders: true},
			n:    1,
			want: map[string]string{
				"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2", "X-RateLimit-Reset": "1",
				"RateLimit-Policy": `"default";q=3;w=2`, "RateLimit": `"default";r=2;t=1`,
			},
		},
		{
			name: "leaky bucket queued counts its queue",
			give: Config{Model: LeakyBucket, Rate: 2, Burst: 2, PublishHeaders: true},
			n:    1,
			want: map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "2"},
		},
		{
			name:  "fixed window resets at the window's end",
			give:  Config{Model: FixedWindow, Limit: 5, Window: time.Minute, PublishHeaders: true, IETFHeaders: true},
			after: 20 * time.Second,
			n:     2,
			want: map[string]string{
				"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "3", "X-RateLimit-Reset": "40",
				"RateLimit-Policy": `"default";q=5;w=60`, "RateLimit": `"default";r=3;t=40`,
			},
		},
		{
			name:  "fixed window, unix reset",
			give:  Config{Model: FixedWindow, Limit: 5, Window: time.Minute, PublishHeaders: true, Reset: ResetUnix},
			after: 20 * time.Second,
			n:     1,
			want:  map[string]string{"X-RateLimit-Reset": "946684860"},
		},
		{
			name:  "fixed window from the first request, duration reset",
			give:  Config{Model: FixedWindowFromFirst, Limit: 5, Window: 6 * time.Minute, PublishHeaders: true, Reset: ResetDuration},
			after: 20 * time.Second,
			n:     1,
			want:  map[string]string{"X-RateLimit-Reset": "6m0s"},
		},
		{
			name:  "sliding window resets at the fixed window's end",
			give:  Config{Model: SlidingWindow, Limit: 10, Window: 10 * time.Second, PublishHeaders: true, Reset: ResetDuration, IETFHeaders: true},
			after: 8500 * ms,
			n:     3,
			want: map[string]string{
				"X-RateLimit-Limit": "10", "X-RateLimit-Remaining": "7", "X-RateLimit-Reset": "1.5s",
				"RateLimit-Policy": `"default";q=10;w=10`, "RateLimit": `"default";r=7;t=2`,
			},
		},
		{
			// At its limit, RateLimit says when one more passes, not when
			// the window ends.
			name: "sliding window at its limit",
			give: Config{Model: SlidingWindow, Limit: 2, Window: 10 * time.Second, IETFHeaders: true},
			n:    3,
			want: map[string]string{"RateLimit": `"default";r=0;t=11`, "Retry-After": "11"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { wantHeaders(t, nth(t, tt.give, tt.after, tt.n), tt.want) })
		})
	}
}

func TestModelRetryAfter(t *testing.T) {
	const s = time.Second
	window := func(m Model, ra RetryAfterMode) Config {
		return Config{Model: m, Limit: 2, Window: time.Minute, RetryAfter: ra}
	}
	tests := []struct {
		name  string
		give  Config
		after time.Duration
		want  string
	}{
		{name: "fixed window, seconds to its end", give: window(FixedWindow, RetryAfterSeconds), after: 20 * s, want: "40"},
		{name: "fixed window, date of its end", give: window(FixedWindow, RetryAfterHTTPDate), after: 20 * s, want: "Sat, 01 Jan 2000 00:01:00 GMT"},
		{name: "fixed window, none", give: window(FixedWindow, RetryAfterNone), after: 20 * s, want: ""},
		{name: "fixed window, the whole window", give: window(FixedWindow, RetryAfterWindow), after: 20 * s, want: "60"},
		{name: "from the first, seconds", give: window(FixedWindowFromFirst, RetryAfterSeconds), after: 20 * s, want: "60"},
		{name: "from the first, date", give: window(FixedWindowFromFirst, RetryAfterHTTPDate), after: 20 * s, want: "Sat, 01 Jan 2000 00:01:20 GMT"},
		{name: "sliding window, seconds", give: window(SlidingWindow, RetryAfterSeconds), after: 20 * s, want: "41"},
		{name: "sliding window, the whole window", give: window(SlidingWindow, RetryAfterWindow), after: 20 * s, want: "60"},
		{
			name: "the whole window, rounded up",
			give: Config{Model: SlidingWindow, Limit: 1, Window: 1500 * time.Millisecond, RetryAfter: RetryAfterWindow},
			want: "2",
		},
		{name: "leaky bucket, seconds", give: Config{Model: LeakyBucket, Rate: 0.25, Burst: 1, NoDelay: true}, want: "4"},
		{name: "leaky bucket, date", give: Config{Model: LeakyBucket, Rate: 0.25, Burst: 1, NoDelay: true, RetryAfter: RetryAfterHTTPDate}, want: "Sat, 01 Jan 2000 00:00:04 GMT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := max(tt.give.Limit, tt.give.Burst+1) + 1
				r := nth(t, tt.give, tt.after, n)
				if r.status != 429 {
					t.Fatalf("request %d: status = %d, want 429", n, r.status)
				}
				wantHeaders(t, r, map[string]string{"Retry-After": tt.want})
			})
		})
	}
}

func TestRefusals(t *testing.T) {
	tests := []struct {
		name       string
		give       Config
		wantStatus int
		wantType   string
		wantBody   string            // contained in the body
		want       map[string]string // headers; "" means absent
	}{
		{
			name:       "429 by default",
			give:       Config{Model: FixedWindow, Limit: 1, Window: time.Minute, PublishHeaders: true},
			wantStatus: 429, wantType: "application/json", wantBody: limitedBody,
			want: map[string]string{"Retry-After": "60", "X-RateLimit-Remaining": "0"},
		},
		{
			name:       "nginx's 503, with the hints",
			give:       Config{Model: LeakyBucket, Rate: 1, RefusalStatus: 503, PublishHeaders: true, IETFHeaders: true},
			wantStatus: 503, wantType: "application/json", wantBody: limitedBody,
			want: map[string]string{"Retry-After": "1", "X-RateLimit-Remaining": "0", "RateLimit": `"default";r=0;t=1`},
		},
		{
			name: "an HTML page and no hint at all",
			give: Config{Model: LeakyBucket, Rate: 1, RefusalStatus: 503, HTMLRefusal: true,
				PublishHeaders: true, IETFHeaders: true, RetryAfter: RetryAfterHTTPDate},
			wantStatus: 503, wantType: "text/html", wantBody: "<title>503 Service Unavailable</title>",
			want: map[string]string{
				"Retry-After": "", "X-RateLimit-Limit": "", "X-RateLimit-Remaining": "", "X-RateLimit-Reset": "",
				"RateLimit": "", "RateLimit-Policy": "",
			},
		},
		{
			name:       "an HTML 429",
			give:       Config{Rate: 1, HTMLRefusal: true},
			wantStatus: 429, wantType: "text/html", wantBody: "<h1>429 Too Many Requests</h1>",
			want: map[string]string{"Retry-After": ""},
		},
		{
			name:       "an HTML status without a name",
			give:       Config{Rate: 1, HTMLRefusal: true, RefusalStatus: 499},
			wantStatus: 499, wantType: "text/html", wantBody: "<title>499</title>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := NewBucket(tt.give)
				first, h, _, err := roundTrip(t, b, context.Background())
				if err != nil || first != 200 {
					t.Fatalf("first request = %d, %v; want 200", first, err)
				}
				if tt.give.PublishHeaders && h.Get("X-RateLimit-Limit") == "" {
					t.Errorf("the admitted request has no X-RateLimit-Limit: HTMLRefusal hides the headers of refusals only")
				}
				status, h, body, err := roundTrip(t, b, context.Background())
				if err != nil {
					t.Fatal(err)
				}
				r := result{status: status, header: h, body: body}
				if status != tt.wantStatus || h.Get("Content-Type") != tt.wantType || !strings.Contains(body, tt.wantBody) {
					t.Errorf("refusal = %d %s %q, want %d %s containing %q", status, h.Get("Content-Type"), body, tt.wantStatus, tt.wantType, tt.wantBody)
				}
				wantHeaders(t, r, tt.want)
				if got, want := b.Stats(), (Stats{Received: 2, Admitted: 1, Limited: 1}); got != want {
					t.Errorf("Stats() = %+v, want %+v", got, want)
				}
			})
		})
	}
}

func TestFormatReset(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 250_000_000, time.UTC) // Unix 1740830400.25
	tests := []struct {
		format ResetFormat
		give   time.Duration
		want   string
	}{
		{format: ResetSeconds, give: 1500 * time.Millisecond, want: "2"},
		{format: ResetSeconds, give: 0, want: "0"},
		{format: ResetUnix, give: 750 * time.Millisecond, want: "1740830401"},
		{format: ResetUnix, give: 800 * time.Millisecond, want: "1740830402"},
		{format: ResetUnix, give: -time.Second, want: "1740830401"},
		{format: ResetDuration, give: 6 * time.Minute, want: "6m0s"},
		{format: ResetDuration, give: 1500 * time.Millisecond, want: "1.5s"},
		{format: ResetDuration, give: 1500*time.Millisecond + 1, want: "1.501s"},
		{format: ResetDuration, give: 0, want: "0s"},
	}
	for _, tt := range tests {
		if got := formatReset(tt.format, now, tt.give); got != tt.want {
			t.Errorf("formatReset(%v, now, %v) = %q, want %q", tt.format, tt.give, got, tt.want)
		}
	}
}
