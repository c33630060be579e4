package kanbanizetest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestPerMinuteLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 30, RetryAfter: RetryAfterSeconds})
		for i := range 30 {
			if r := get(t, s, "/cards/100"); r.status != 200 {
				t.Fatalf("request %d = %d %s, want 200", i+1, r.status, r.body)
			}
		}
		// Refusals take no token, or each would push the next pass further.
		for i := range 5 {
			r := get(t, s, "/cards/100")
			if r.status != 429 {
				t.Fatalf("request %d = %d, want 429", 31+i, r.status)
			}
			if e := errorOf(t, r).Error; e.Code != "RL01" || e.Message != "Rate limit exceeded." {
				t.Errorf("request %d: error = %+v, want RL01 %q", 31+i, e, "Rate limit exceeded.")
			}
			if got := r.header.Get("Retry-After"); got != "2" {
				t.Errorf("request %d: Retry-After = %q, want %q", 31+i, got, "2")
			}
		}
		time.Sleep(2 * time.Second)
		if r := get(t, s, "/cards/100"); r.status != 200 {
			t.Errorf("request after 2s = %d, want 200", r.status)
		}
		if r := get(t, s, "/cards/100"); r.status != 429 || r.header.Get("Retry-After") != "2" {
			t.Errorf("next request = %d Retry-After %q, want 429 Retry-After 2", r.status, r.header.Get("Retry-After"))
		}
		if got := s.Stats().Limited; got != 6 {
			t.Errorf("Stats().Limited = %d, want 6", got)
		}
	})
}

func TestPerHourLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerHour: 5, RetryAfter: RetryAfterSeconds})
		for i := range 5 {
			if r := get(t, s, "/cards/101/comments"); r.status != 200 {
				t.Fatalf("request %d = %d, want 200", i+1, r.status)
			}
		}
		r := get(t, s, "/cards/101/comments")
		if r.status != 429 || r.header.Get("Retry-After") != "720" {
			t.Fatalf("request 6 = %d Retry-After %q, want 429 Retry-After 720", r.status, r.header.Get("Retry-After"))
		}
		time.Sleep(719 * time.Second)
		if r := get(t, s, "/cards/101/comments"); r.status != 429 || r.header.Get("Retry-After") != "1" {
			t.Errorf("request at 719s = %d Retry-After %q, want 429 Retry-After 1", r.status, r.header.Get("Retry-After"))
		}
		time.Sleep(time.Second)
		if r := get(t, s, "/cards/101/comments"); r.status != 200 {
			t.Errorf("request at 720s = %d, want 200", r.status)
		}
	})
}

func TestBothLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 2, PerHour: 3, RetryAfter: RetryAfterSeconds})
		statuses := func(n int) []int {
			var got []int
			for range n {
				got = append(got, get(t, s, "/cards/100/subtasks").status)
			}
			return got
		}
		// The minute bucket refuses the last five. Had they taken a token
		// from the hour bucket, it would have none to give at 30s.
		if got, want := statuses(7), []int{200, 200, 429, 429, 429, 429, 429}; !slices.Equal(got, want) {
			t.Fatalf("statuses at 0s = %v, want %v", got, want)
		}
		time.Sleep(30 * time.Second)
		if got, want := statuses(2), []int{200, 429}; !slices.Equal(got, want) {
			t.Fatalf("statuses at 30s = %v, want %v", got, want)
		}
		// At 90s the minute bucket is full but the hour bucket, holding
		// 0.075 token, is the later: 0.925 × 1200s = 1110s. Float rounding
		// may make it 1111, which is still a safe hint.
		time.Sleep(time.Minute)
		r := get(t, s, "/cards/100/subtasks")
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if r.status != 429 || ra < 1110 || ra > 1111 {
			t.Errorf("request at 90s = %d Retry-After %q, want 429 Retry-After 1110", r.status, r.header.Get("Retry-After"))
		}
	})
}

func TestRefusalForms(t *testing.T) {
	tests := []struct {
		name       string
		give       Config
		wantStatus int
		wantCode   string
		wantRA     string // Retry-After; "date" means an HTTP date 60s on
	}{
		{name: "none, the default", give: Config{PerMinute: 1}, wantStatus: 429, wantCode: "RL01"},
		{name: "seconds", give: Config{PerMinute: 1, RetryAfter: RetryAfterSeconds}, wantStatus: 429, wantCode: "RL01", wantRA: "60"},
		{name: "HTTP date", give: Config{PerMinute: 1, RetryAfter: RetryAfterHTTPDate}, wantStatus: 429, wantCode: "RL01", wantRA: "date"},
		{name: "none", give: Config{PerMinute: 1, RetryAfter: RetryAfterNone}, wantStatus: 429, wantCode: "RL01"},
		{name: "RL02", give: Config{PerMinute: 1, RL02: true, RetryAfter: RetryAfterSeconds}, wantStatus: 400, wantCode: "RL02", wantRA: "60"},
		{name: "RL02 without Retry-After", give: Config{PerHour: 1, RL02: true}, wantStatus: 400, wantCode: "RL02"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(tt.give)
				get(t, s, "/cards/100")
				start := time.Now()
				r := get(t, s, "/cards/100")
				if r.status != tt.wantStatus {
					t.Fatalf("second request = %d %s, want %d", r.status, r.body, tt.wantStatus)
				}
				if got := errorOf(t, r).Error.Code; got != tt.wantCode {
					t.Errorf("code = %q, want %q", got, tt.wantCode)
				}
				values := r.header.Values("Retry-After")
				switch tt.wantRA {
				case "":
					if len(values) != 0 {
						t.Errorf("Retry-After = %q, want none", values)
					}
				case "date":
					at, err := http.ParseTime(r.header.Get("Retry-After"))
					if err != nil {
						t.Fatalf("Retry-After = %q, want an HTTP date: %v", r.header.Get("Retry-After"), err)
					}
					if want := start.Add(time.Minute); !at.Equal(want) {
						t.Errorf("Retry-After = %v, want %v", at, want)
					}
				default:
					if len(values) != 1 || values[0] != tt.wantRA {
						t.Errorf("Retry-After = %q, want [%s]", values, tt.wantRA)
					}
				}
			})
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 250_000_000, time.FixedZone("CET", 3600))
	tests := []struct {
		mode RetryAfterMode
		give time.Duration
		want string
	}{
		{mode: RetryAfterSeconds, give: time.Nanosecond, want: "1"},
		{mode: RetryAfterSeconds, give: 0, want: "1"},
		{mode: RetryAfterSeconds, give: 2 * time.Second, want: "2"},
		{mode: RetryAfterSeconds, give: 2*time.Second + 1, want: "3"},
		// 12:00:00.25 CET + 0.75s is exactly 11:00:01 UTC.
		{mode: RetryAfterHTTPDate, give: 750 * time.Millisecond, want: "Sat, 01 Mar 2025 11:00:01 GMT"},
		{mode: RetryAfterHTTPDate, give: 800 * time.Millisecond, want: "Sat, 01 Mar 2025 11:00:02 GMT"},
		{mode: RetryAfterNone, give: time.Second, want: ""},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.mode, now, tt.give); got != tt.want {
			t.Errorf("retryAfter(%v, now, %v) = %q, want %q", tt.mode, tt.give, got, tt.want)
		}
	}
}

func TestTimeScaleSpeedsTheWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 30, TimeScale: 20}) // 30 every 3s
		for i := range 30 {
			if r := get(t, s, "/cards/100"); r.status != 200 {
				t.Fatalf("request %d: status %d", i, r.status)
			}
		}
		if r := get(t, s, "/cards/100"); r.status != 429 {
			t.Fatalf("31st request: status %d, want 429", r.status)
		}
		time.Sleep(100 * time.Millisecond) // a token every 0.1s
		if r := get(t, s, "/cards/100"); r.status != 200 {
			t.Errorf("after 0.1s: status %d, want 200", r.status)
		}
	})
	if err := (Config{TimeScale: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "TimeScale") {
		t.Errorf("Validate(TimeScale -1) = %v, want it named", err)
	}
}

// kanbanize-rate-limit-plan.md §16 (open questions): nothing public says
// whether the limits are per API key or per account, so the fake does
// either. By default each key has its own buckets; with PerAccount every
// key of the account takes from one pair, and one key's requests get
// another's refused.
func TestLimitsPerKeyOrPerAccount(t *testing.T) {
	const other = "second-user-key"
	tests := []struct {
		name       string
		perAccount bool
		want       []int // the first key's two requests, then the other's
	}{
		{name: "per key", want: []int{200, 200, 200}},
		{name: "per account", perAccount: true, want: []int{200, 200, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{PerMinute: 2, APIKeys: []string{other}, PerAccount: tt.perAccount})
				var got []int
				for _, key := range []string{DefaultAPIKey, DefaultAPIKey, other} {
					got = append(got, do(t, s.Transport(), http.MethodGet, api+"/cards/100", key).status)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("statuses = %v, want %v", got, tt.want)
				}
				if r := do(t, s.Transport(), http.MethodGet, api+"/cards/100", "a-third-key"); r.status != 401 {
					t.Errorf("a key the account does not have = %d, want 401", r.status)
				}
			})
		})
	}
	if err := (Config{APIKeys: []string{"k", ""}}).Validate(); err == nil || !strings.Contains(err.Error(), "APIKeys[1] is empty") {
		t.Errorf("Validate(an empty key in APIKeys) = %v, want it named", err)
	}
}

// kanbanize-rate-limit-plan.md §1 (stay under the published limits):
// GET /api/v2/apiLimits tells the account its limits in the shape of the
// API's OpenAPI document, counts against them like any request, and lists
// none when the fake has none.
func TestAPILimits(t *testing.T) {
	type apiLimits struct {
		Data []struct {
			Types string `json:"types"`
			Limit int    `json:"limit"`
		} `json:"data"`
	}
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 2, PerHour: 600})
		r := get(t, s, "/apiLimits")
		var got apiLimits
		dec := json.NewDecoder(strings.NewReader(r.body))
		dec.DisallowUnknownFields()
		if r.status != 200 || dec.Decode(&got) != nil {
			t.Fatalf("GET /apiLimits = %d %s, want 200 and the limits", r.status, r.body)
		}
		if want := `{"data":[{"types":"minutely","limit":2},{"types":"hourly","limit":600}]}`; r.body != want {
			t.Errorf("GET /apiLimits = %s, want %s", r.body, want)
		}
		// It took a token: one card request passes, the next is refused.
		if a, b := get(t, s, "/cards/100").status, get(t, s, "/cards/100").status; a != 200 || b != 429 {
			t.Errorf("after GET /apiLimits: %d then %d, want 200 then 429", a, b)
		}
		if st := s.Stats(); st.ByEndpoint[EndpointAPILimits] != 1 || st.Limited != 1 {
			t.Errorf("stats = %+v, want one apiLimits request and one refusal", st)
		}
	})
	if r := get(t, New(Config{}), "/apiLimits"); r.status != 200 || r.body != `{"data":[]}` {
		t.Errorf("GET /apiLimits without limits = %d %s, want an empty list", r.status, r.body)
	}
	s := New(Config{PerMinute: 30, Scripts: map[Endpoint][]Fault{EndpointAPILimits: {Fault503}}})
	if r := get(t, s, "/apiLimits"); r.status != 503 {
		t.Errorf("scripted GET /apiLimits = %d, want 503", r.status)
	}
	if r := do(t, s.Transport(), http.MethodGet, api+"/apiLimits", "wrong"); r.status != 401 {
		t.Errorf("GET /apiLimits with a wrong key = %d, want 401", r.status)
	}
}

// kanbanize-rate-limit-plan.md §1: an account's plan can change while a
// client runs; SetLimits changes the fake's limits as it would, keeping
// the tokens each bucket has up to its new size, and GET /apiLimits
// tells the new ones.
func TestSetLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 60, PerHour: 900})
		for range 20 {
			get(t, s, "/cards/100")
		}
		s.SetLimits(30, 600) // 40 tokens left of 60, 30 of them kept
		var got []int
		for range 31 {
			got = append(got, get(t, s, "/cards/100").status)
		}
		if want := append(slices.Repeat([]int{200}, 30), 429); !slices.Equal(got, want) {
			t.Errorf("statuses after SetLimits(30, 600) = %v, want 30 passed, then refused", got)
		}
		time.Sleep(2 * time.Second) // a token every 2s now
		if r := get(t, s, "/cards/100"); r.status != 200 {
			t.Errorf("2s later = %d, want 200", r.status)
		}
		time.Sleep(2 * time.Second)
		if r := get(t, s, "/apiLimits"); r.body != `{"data":[{"types":"minutely","limit":30},{"types":"hourly","limit":600}]}` {
			t.Errorf("GET /apiLimits = %s, want the new limits", r.body)
		}
		s.SetLimits(0, 600)
		for range 5 {
			if r := get(t, s, "/cards/100"); r.status != 200 {
				t.Fatalf("without a per-minute limit: %d, want 200", r.status)
			}
		}
	})
}
