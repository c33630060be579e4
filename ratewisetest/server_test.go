package ratewisetest

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestBucketEnforcement(t *testing.T) {
	s := newServer(t, Config{Rate: 1, Burst: 2})
	rs := getN(t, s, 3)

	if got, want := statuses(rs), []int{200, 200, 429}; !slices.Equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	if got := rs[0].body; got != "ok" {
		t.Errorf("body of an admitted request = %q, want %q", got, "ok")
	}
	limited := rs[2]
	if got := limited.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want %q", got, "1")
	}
	if got := limited.body; got != `{"error":"rate limited"}` {
		t.Errorf("429 body = %q, want %q", got, `{"error":"rate limited"}`)
	}
	if got := limited.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("429 Content-Type = %q, want %q", got, "application/json")
	}
	if got, want := s.Stats(), (Stats{Received: 3, Admitted: 2, Limited: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestLimitedRequestTakesNoToken(t *testing.T) {
	// At 0.5/s a token takes 2s. Were 429s to take tokens, the bucket would
	// sink further into debt with each one and the waits would grow.
	s := newServer(t, Config{Rate: 0.5, Burst: 1, PublishHeaders: true})
	rs := getN(t, s, 6)
	for i, r := range rs[1:] {
		if r.status != 429 {
			t.Fatalf("status of request %d = %d, want 429", i+2, r.status)
		}
		if got := r.header.Get("Retry-After"); got != "2" {
			t.Errorf("Retry-After of request %d = %q, want %q", i+2, got, "2")
		}
		if got := r.header.Get("X-RateLimit-Reset"); got != "2" {
			t.Errorf("X-RateLimit-Reset of request %d = %q, want %q", i+2, got, "2")
		}
	}
}

func TestBucketRefills(t *testing.T) {
	s := newServer(t, Config{Rate: 200, Burst: 1})
	get(t, s.Client(), s.URL, "", "")
	time.Sleep(10 * time.Millisecond) // two tokens' worth
	if got := get(t, s.Client(), s.URL, "", "").status; got != 200 {
		t.Errorf("status after the bucket refilled = %d, want 200", got)
	}
}

func TestNoLimit(t *testing.T) {
	s := newServer(t, Config{})
	for i, r := range getN(t, s, 20) {
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d = %d %q, want 200 %q", i+1, r.status, r.body, "ok")
		}
	}
	if got, want := s.Stats(), (Stats{Received: 20, Admitted: 20}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestHandler(t *testing.T) {
	s := newServer(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte("made " + r.URL.Path))
	})})
	r := get(t, s.Client(), s.URL+"/thing", "", "")
	if r.status != 201 || r.body != "made /thing" {
		t.Errorf("GET /thing = %d %q, want 201 %q", r.status, r.body, "made /thing")
	}
}

func TestRetryAfterModes(t *testing.T) {
	tests := []struct {
		give  RetryAfterMode
		check func(t *testing.T, value string, sent time.Time)
	}{
		{
			give: RetryAfterSeconds,
			check: func(t *testing.T, value string, _ time.Time) {
				if value != "1" {
					t.Errorf("Retry-After = %q, want %q", value, "1")
				}
			},
		},
		{
			give: RetryAfterHTTPDate,
			check: func(t *testing.T, value string, sent time.Time) {
				at, err := time.Parse(http.TimeFormat, value)
				if err != nil {
					t.Fatalf("Retry-After = %q, want an http.TimeFormat date: %v", value, err)
				}
				// About one second away, rounded up to a whole second;
				// the margins absorb the time the requests took.
				if ahead := at.Sub(sent); ahead < 900*time.Millisecond || ahead > 2500*time.Millisecond {
					t.Errorf("Retry-After = %q, %v after the request, want 1s to 2s", value, ahead)
				}
			},
		},
		{
			give: RetryAfterNone,
			check: func(t *testing.T, value string, _ time.Time) {
				if value != "" {
					t.Errorf("Retry-After = %q, want none", value)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			s := newServer(t, Config{Rate: 1, Burst: 2, RetryAfter: tt.give})
			getN(t, s, 2)
			sent := time.Now()
			r := get(t, s.Client(), s.URL, "", "")
			if r.status != 429 {
				t.Fatalf("status = %d, want 429", r.status)
			}
			tt.check(t, r.header.Get("Retry-After"), sent)
		})
	}
}

func TestKeyHeader(t *testing.T) {
	s := newServer(t, Config{Rate: 0.5, Burst: 2, KeyHeader: "X-Api-Key"})
	tests := []struct {
		give string // key; "" sends no header
		want int
	}{
		{give: "a", want: 200},
		{give: "a", want: 200},
		{give: "a", want: 429},
		{give: "b", want: 200},
		{give: "", want: 200},
		{give: "b", want: 200},
		{give: "b", want: 429},
		{give: "", want: 200},
		{give: "", want: 429},
	}
	for i, tt := range tests {
		header := ""
		if tt.give != "" {
			header = "X-Api-Key"
		}
		if got := get(t, s.Client(), s.URL, header, tt.give).status; got != tt.want {
			t.Errorf("request %d with key %q: status = %d, want %d", i+1, tt.give, got, tt.want)
		}
	}
}

func TestRateLimitHeaders(t *testing.T) {
	tests := []struct {
		name     string
		give     Config
		requests int               // the last one's headers are checked
		want     map[string]string // "" means absent
	}{
		{
			name:     "off",
			give:     Config{Rate: 1, Burst: 5},
			requests: 1,
			want:     map[string]string{"X-RateLimit-Limit": "", "RateLimit": "", "RateLimit-Policy": ""},
		},
		{
			name:     "X-RateLimit fresh bucket",
			give:     Config{Rate: 0.5, Burst: 5, PublishHeaders: true},
			requests: 1,
			want:     map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4", "X-RateLimit-Reset": "2", "RateLimit": ""},
		},
		{
			name:     "X-RateLimit on a 429",
			give:     Config{Rate: 0.5, Burst: 1, PublishHeaders: true},
			requests: 2,
			want:     map[string]string{"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2", "Retry-After": "2"},
		},
		{
			name:     "IETF fresh bucket",
			give:     Config{Rate: 0.5, Burst: 5, IETFHeaders: true},
			requests: 1,
			want:     map[string]string{"RateLimit-Policy": `"default";q=5;w=10`, "RateLimit": `"default";r=4;t=2`, "X-RateLimit-Limit": ""},
		},
		{
			name:     "IETF until full",
			give:     Config{Rate: 0.25, Burst: 3, IETFHeaders: true},
			requests: 2,
			want:     map[string]string{"RateLimit-Policy": `"default";q=3;w=12`, "RateLimit": `"default";r=1;t=8`},
		},
		{
			name:     "IETF empty bucket counts until one token",
			give:     Config{Rate: 0.25, Burst: 2, IETFHeaders: true},
			requests: 2,
			want:     map[string]string{"RateLimit": `"default";r=0;t=4`},
		},
		{
			name:     "IETF on a 429",
			give:     Config{Rate: 0.5, Burst: 1, IETFHeaders: true},
			requests: 2,
			want:     map[string]string{"RateLimit-Policy": `"default";q=1;w=2`, "RateLimit": `"default";r=0;t=2`},
		},
		{
			name:     "policy window at least 1s",
			give:     Config{Rate: 100, Burst: 1, IETFHeaders: true},
			requests: 1,
			want:     map[string]string{"RateLimit-Policy": `"default";q=1;w=1`},
		},
		{
			name:     "no limit, no headers",
			give:     Config{PublishHeaders: true, IETFHeaders: true},
			requests: 1,
			want:     map[string]string{"X-RateLimit-Limit": "", "RateLimit": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.give)
			rs := getN(t, s, tt.requests)
			h := rs[len(rs)-1].header
			for name, want := range tt.want {
				if got := h.Get(name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := newServer(t, Config{Rate: 0.5, Burst: 5, PublishHeaders: true})
	const n = 20
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Go(func() {
			resp, err := s.Client().Get(s.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	if ok != 5 {
		t.Errorf("%d concurrent requests against Burst 5 got %d 200s, want 5", n, ok)
	}
	if got, want := s.Stats(), (Stats{Received: n, Admitted: 5, Limited: n - 5}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if got := len(s.Arrivals()); got != n {
		t.Errorf("len(Arrivals()) = %d, want %d", got, n)
	}
}

func TestArrivals(t *testing.T) {
	s := newServer(t, Config{})
	before := time.Now()
	getN(t, s, 4)
	after := time.Now()
	got := s.Arrivals()
	if len(got) != 4 {
		t.Fatalf("len(Arrivals()) = %d, want 4", len(got))
	}
	if !slices.IsSortedFunc(got, func(a, b time.Time) int { return a.Compare(b) }) {
		t.Errorf("Arrivals() = %v, want them in order", got)
	}
	if got[0].Before(before) || got[3].After(after) {
		t.Errorf("Arrivals() = %v, want them within [%v, %v]", got, before, after)
	}
	got[0] = time.Time{}
	if s.Arrivals()[0].IsZero() {
		t.Errorf("changing the slice Arrivals returned changed the server's record")
	}
}

func TestURLIsLoopback(t *testing.T) {
	s := newServer(t, Config{})
	if !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want http://127.0.0.1:port", s.URL)
	}
}

// TestUnixResetIsTheWindowsEnd checks, on a real loopback server and the
// real clock, that every answer of one fixed window names its end as
// X-RateLimit-Reset. A server that measured the wait to the end on the
// monotonic clock and added it to the wall clock's now named the second
// after the end in about half its answers, whenever the two clocks had
// drifted apart since the window opened: a client that honours the reset
// then lost a whole window. A window of an hour keeps the test's requests
// in one window (or two, when the hour turns), each ending on the hour;
// no request waits. The drift cannot be made in a test, so on a machine
// whose clocks never part this passes on the old code too: see
// TestModelsKeepWallClockTime.
func TestUnixResetIsTheWindowsEnd(t *testing.T) {
	s := newServer(t, Config{Model: FixedWindow, Limit: 100, Window: time.Hour,
		PublishHeaders: true, Reset: ResetUnix, RetryAfter: RetryAfterNone})
	for i, r := range getN(t, s, 400) {
		reset := r.header.Get("X-RateLimit-Reset")
		sec, err := strconv.ParseInt(reset, 10, 64)
		if err != nil {
			t.Fatalf("answer %d: X-RateLimit-Reset %q is no Unix time", i, reset)
		}
		if sec%3600 != 0 {
			t.Fatalf("answer %d: X-RateLimit-Reset = %d, %d s past the hour: not the window's end", i, sec, sec%3600)
		}
	}
}

// TestModelsKeepWallClockTime checks that the time the models decide at
// carries no monotonic reading, so that every wait they compute is on the
// wall clock that the headers' times are written in.
func TestModelsKeepWallClockTime(t *testing.T) {
	a := newAPI(Config{Model: FixedWindow, Limit: 1, Window: time.Minute})
	if _, now, _ := a.take(""); now != now.Round(0) {
		t.Errorf("take decided at %v, which has a monotonic reading", now)
	}
}
