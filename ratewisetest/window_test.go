package ratewisetest

import (
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

func TestWindowModels(t *testing.T) {
	const (
		ms = time.Millisecond
		s  = time.Second
	)
	tests := []struct {
		name  string
		give  Config
		calls []call
	}{
		{
			// The (Limit+1)th is refused until the window's end, then the
			// count starts again.
			name: "fixed window",
			give: Config{Model: FixedWindow, Limit: 3, Window: 10 * s},
			calls: []call{
				{0, 200, "2", ""}, {0, 200, "1", ""}, {0, 200, "0", ""}, {0, 429, "0", "10"},
				{4 * s, 429, "0", "6"},
				{9500 * ms, 429, "0", "1"},
				{10 * s, 200, "2", ""},
				// Two windows later the count is fresh.
				{35 * s, 200, "2", ""},
			},
		},
		{
			// Windows follow the clock: one first used 5s in ends 5s later.
			name: "fixed window first used mid-window",
			give: Config{Model: FixedWindow, Limit: 2, Window: 10 * s},
			calls: []call{
				{5 * s, 200, "1", ""}, {5 * s, 200, "0", ""}, {5 * s, 429, "0", "5"},
				{10 * s, 200, "1", ""},
			},
		},
		{
			// The window opens at the first request, 5s in, and lasts 10s;
			// the next opens at the first request after it ends, at 17s.
			name: "fixed window from the first request",
			give: Config{Model: FixedWindowFromFirst, Limit: 2, Window: 10 * s},
			calls: []call{
				{5 * s, 200, "1", ""}, {5 * s, 200, "0", ""}, {5 * s, 429, "0", "10"},
				{10 * s, 429, "0", "5"},
				// Not at 15s, when the first ended, nor at 25s.
				{17 * s, 200, "1", ""}, {17 * s, 200, "0", ""}, {17 * s, 429, "0", "10"},
				{25 * s, 429, "0", "2"},
				{27 * s, 200, "1", ""},
			},
		},
		{
			// count = previous × (Window − elapsed)/Window + current, and
			// a request is refused when count >= Limit.
			name: "sliding window",
			give: Config{Model: SlidingWindow, Limit: 4, Window: 10 * s},
			calls: []call{
				// 4 at once; the next window starts at 4 in full, so none
				// passes before a nanosecond past 10s.
				{0, 200, "3", ""}, {0, 200, "2", ""}, {0, 200, "1", ""}, {0, 200, "0", ""}, {0, 429, "0", "11"},
				// At 10s: 4 × 1 + 0 = 4.
				{10 * s, 429, "0", "1"},
				// At 12.5s: 4 × 0.75 + 0 = 3 passes, and then it is 4.
				{12500 * ms, 200, "0", ""}, {12500 * ms, 429, "0", "1"},
				// At 15s: 4 × 0.5 + 1 = 3.
				{15 * s, 200, "0", ""},
				// At 18s: 4 × 0.2 + 2 = 2.8, so two pass; with the
				// current window at its limit, the next passes a
				// nanosecond into the next window.
				{18 * s, 200, "1", ""}, {18 * s, 200, "0", ""}, {18 * s, 429, "0", "3"},
				// At 21s: 4 × 0.9 + 0 = 3.6 passes; the next waits until
				// 4 × (10s − elapsed)/10s + 1 < 4, past 22.5s.
				{21 * s, 200, "0", ""}, {21 * s, 429, "0", "2"},
				// After a window with no request the count is fresh.
				{40 * s, 200, "3", ""},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runSchedule(t, tt.give, tt.calls) })
		})
	}
}

func TestWindowKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{Model: FixedWindow, Limit: 1, Window: time.Minute, KeyHeader: "X-Api-Key"})
		tests := []struct {
			give string // key; "" sends no header
			want int
		}{
			{give: "a", want: 200},
			{give: "a", want: 429},
			{give: "b", want: 200},
			{give: "", want: 200},
			{give: "", want: 429},
		}
		for i, tt := range tests {
			req, err := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.give != "" {
				req.Header.Set("X-Api-Key", tt.give)
			}
			resp, err := b.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("request %d with key %q: status = %d, want %d", i+1, tt.give, resp.StatusCode, tt.want)
			}
		}
	})
}

func TestWindowOf(t *testing.T) {
	tests := []struct {
		give      time.Time
		window    time.Duration
		wantIndex int64
		wantInto  time.Duration
	}{
		{give: time.Unix(0, 0), window: time.Second, wantIndex: 0, wantInto: 0},
		{give: time.Unix(125, 0), window: time.Minute, wantIndex: 2, wantInto: 5 * time.Second},
		{give: time.Unix(-1, 0), window: time.Minute, wantIndex: -1, wantInto: 59 * time.Second},
		{give: time.Unix(-60, 0), window: time.Minute, wantIndex: -1, wantInto: 0},
		// 946684800 = 7 × 135240685 + 5.
		{give: time.Date(2000, 1, 1, 0, 0, 7, 0, time.UTC), window: 7 * time.Second, wantIndex: 135240686, wantInto: 5 * time.Second},
		// A synctest bubble starts at midnight: aligned to a day.
		{give: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), window: 24 * time.Hour, wantIndex: 10957, wantInto: 0},
	}
	for _, tt := range tests {
		index, into := windowOf(tt.give, tt.window)
		if index != tt.wantIndex || into != tt.wantInto {
			t.Errorf("windowOf(%v, %v) = %d, %v; want %d, %v", tt.give.Unix(), tt.window, index, into, tt.wantIndex, tt.wantInto)
		}
	}
}

func TestExactArithmetic(t *testing.T) {
	const big = math.MaxUint64
	if !productLess(big, 2, big, 3) || productLess(big, 3, big, 3) || productLess(big, 3, 3, big-1) {
		t.Error("productLess is wrong past 64 bits")
	}
	tests := []struct {
		name    string
		f       func(a, b, c uint64) time.Duration
		a, b, c uint64
		want    time.Duration
	}{
		{name: "mulDiv", f: mulDiv, a: 7, b: 10, c: 4, want: 17},
		{name: "mulDiv", f: mulDiv, a: 1 << 40, b: 1 << 40, c: 1 << 30, want: 1 << 50},
		{name: "mulDiv", f: mulDiv, a: big, b: big, c: 2, want: math.MaxInt64},
		{name: "ceilMulDiv", f: ceilMulDiv, a: 7, b: 10, c: 4, want: 18},
		{name: "ceilMulDiv", f: ceilMulDiv, a: 8, b: 10, c: 4, want: 20},
		{name: "ceilMulDiv", f: ceilMulDiv, a: big, b: 1, c: 1, want: math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.f(tt.a, tt.b, tt.c); got != tt.want {
			t.Errorf("%s(%d, %d, %d) = %d, want %d", tt.name, tt.a, tt.b, tt.c, got, tt.want)
		}
	}
}
