package bench

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// tinyBucket and tinyWindow are limits small enough to fill at once.
var (
	tinyBucket = Scenario{Name: "tiny bucket", Rate: 10, Burst: 5, Workers: 20, Calls: 20}
	tinyWindow = Scenario{Name: "tiny window", Limit: 5, Window: 10 * time.Second, Workers: 20, Calls: 20}
)

// apiNamed returns the API whose name matches re.
func apiNamed(t *testing.T, re string) API {
	t.Helper()
	for _, a := range APIs() {
		if regexp.MustCompile(re).MatchString(a.Name) {
			return a
		}
	}
	t.Fatalf("no API matches %q", re)
	return API{}
}

// get sends one GET through rt and returns the response with its body
// read.
func get(t *testing.T, rt http.RoundTripper, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/items", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return resp, string(body)
}

// refusalTest is what a server answers once its limit is spent, and when
// it admits again.
type refusalTest struct {
	api string // regexp of the API's name
	s   Scenario
	// header is every rate-limit header the refusal carries, a value or a
	// regexp of it ("" for a header it must not send).
	header map[string]string
	body   string
	// again is how long until Limit (or Burst) requests pass again.
	again time.Duration
}

var refusalTests = []refusalTest{
	{api: "tollbooth", s: tinyBucket, header: map[string]string{
		"X-Rate-Limit-Limit": "10.00", "X-Rate-Limit-Duration": "1", "Ratelimit-Limit": "10",
		"Ratelimit-Remaining": "0", "Ratelimit-Reset": "1", "Retry-After": "", "X-Ratelimit-Reset": "",
	}, body: "You have reached maximum request limit.", again: 500 * time.Millisecond},
	// Five at once fill the GCRA to 500ms ahead; the next may go at 100ms.
	{api: "throttled", s: tinyBucket, header: map[string]string{
		"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1", "Retry-After": "1",
	}, body: "limit exceeded\n", again: 500 * time.Millisecond},
	// The bubble's clock starts at 946684800 (2000-01-01); the window,
	// started when the limiter was made, ends 10s later. A sliding
	// window forgets the previous one after a second window.
	{api: "httprate", s: tinyWindow, header: map[string]string{
		"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "946684810", "Retry-After": "10",
	}, body: "Too Many Requests\n", again: 20 * time.Second},
	{api: "ulule", s: tinyWindow, header: map[string]string{
		"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "946684810", "Retry-After": "",
	}, body: "Limit exceeded\n", again: 10*time.Second + time.Nanosecond},
}

// checkRefusal fills srv's limit at once, then checks the refusal that
// follows and the counts.
func checkRefusal(t *testing.T, tt refusalTest, srv Server) {
	t.Helper()
	n := tt.s.Burst
	if tt.s.Windowed() {
		n = tt.s.Limit
	}
	for i := range n {
		if resp, _ := get(t, srv.Transport(), srv.URL()); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d of %d = %d, want 200", i+1, n, resp.StatusCode)
		}
	}
	resp, body := get(t, srv.Transport(), srv.URL())
	if resp.StatusCode != http.StatusTooManyRequests || body != tt.body {
		t.Errorf("request %d = %d %q, want 429 %q", n+1, resp.StatusCode, body, tt.body)
	}
	for name, want := range tt.header {
		got, sent := resp.Header[name]
		switch {
		case want == "" && sent:
			t.Errorf("refusal header %s = %q, want none", name, got)
		case want != "" && (len(got) != 1 || !regexp.MustCompile("^"+want+"$").MatchString(got[0])):
			t.Errorf("refusal header %s = %q, want %q", name, got, want)
		}
	}
	if received, refused := srv.Stats(); received != n+1 || refused != 1 {
		t.Errorf("Stats() = %d received, %d refused; want %d, 1", received, refused, n+1)
	}
}

func TestMiddlewareRefusalsInProcess(t *testing.T) {
	for _, tt := range refusalTests {
		t.Run(tt.api, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := apiNamed(t, tt.api).InProcess(tt.s)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				checkRefusal(t, tt, srv)
				time.Sleep(tt.again)
				n := tt.s.Burst + tt.s.Limit
				for i := range n + 1 {
					want := http.StatusOK
					if i == n {
						want = http.StatusTooManyRequests
					}
					if resp, _ := get(t, srv.Transport(), srv.URL()); resp.StatusCode != want {
						t.Errorf("%v later, request %d = %d, want %d", tt.again, i+1, resp.StatusCode, want)
					}
				}
			})
		})
	}
}

func TestGoLimiterRefusalOnLoopback(t *testing.T) {
	tt := refusalTest{api: "go-limiter", s: tinyWindow, header: map[string]string{
		"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset": `\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d UTC`,
		"Retry-After":       `\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d UTC`,
	}, body: "Too Many Requests\n"}
	api := apiNamed(t, tt.api)
	if api.InProcess != nil {
		t.Errorf("%s has an in-process form; it reads the wall clock, which fake time does not move", api.Name)
	}
	srv, err := api.Loopback(tt.s)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	checkRefusal(t, tt, srv)
}

// TestEveryServerOnLoopback starts each server but nginx (TestNginx) on
// loopback, fills its limit with twenty calls at once, and checks what
// the run counted. The limits are slow enough (1/s, 5 per minute) that
// none refills meanwhile; a queued leaky bucket answers its queue of 5 at
// 4/s.
func TestEveryServerOnLoopback(t *testing.T) {
	for _, api := range APIs() {
		if strings.HasPrefix(api.Name, "nginx") {
			continue
		}
		t.Run(api.Name, func(t *testing.T) {
			s := Scenario{Name: "slow bucket", Rate: 1, Burst: 5, Workers: 20, Calls: 20}
			admitted := 5
			switch api.Model {
			case NginxNoDelay:
				admitted = 6
			case NginxQueued:
				s.Rate, admitted = 4, 6
			case FixedWindow, FixedWindowFromFirst, SlidingWindow:
				s = Scenario{Name: "slow window", Limit: 5, Window: time.Minute, Workers: 20, Calls: 20}
			}
			srv, err := api.Loopback(s)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r := Run(context.Background(), s, Plain(), srv, api.Ideal(s))
			if want := 20 - admitted; r.Received != 20 || r.Refused != want || r.Failed != want || r.Cut {
				t.Errorf("Run = %d received, %d refused, %d failed, cut %v; want 20, %d, %[5]d, not cut",
					r.Received, r.Refused, r.Failed, r.Cut, want)
			}
		})
	}
}

// TestNginx runs nginx's limit_req in its two forms on loopback: twenty
// calls at once into a burst of 5. With nodelay, 6 pass at once; queued,
// one passes, 5 wait in nginx to be answered a quarter second apart, and
// the 14 others are refused.
func TestNginx(t *testing.T) {
	if _, err := Nginx(); err != nil {
		t.Skipf("nginx cannot be had here, so its tables cannot run: %v", err)
	}
	tests := []struct {
		api     string
		s       Scenario
		slowest time.Duration // the last call's answer comes no sooner
	}{
		{"nodelay", Scenario{Name: "nodelay", Rate: 1, Burst: 5, Workers: 20, Calls: 20}, 0},
		{"queued", Scenario{Name: "queued", Rate: 4, Burst: 5, Workers: 20, Calls: 20}, 1250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.api, func(t *testing.T) {
			api := apiNamed(t, "^nginx limit_req "+tt.api)
			if api.InProcess != nil {
				t.Errorf("%s has an in-process form", api.Name)
			}
			srv, err := api.Loopback(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r := Run(context.Background(), tt.s, Plain(), srv, api.Ideal(tt.s))
			if r.Received != 20 || r.Refused != 14 || r.Failed != 14 || r.Cut {
				t.Errorf("Run = %d received, %d refused, %d failed, cut %v; want 20, 14, 14, not cut", r.Received, r.Refused, r.Failed, r.Cut)
			}
			if r.Wall < tt.slowest {
				t.Errorf("Run took %v, want at least %v", r.Wall, tt.slowest)
			}
			if tt.api == "queued" {
				return // the queue has drained: one more request would pass
			}
			resp, body := get(t, srv.Transport(), srv.URL())
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "<title>429 Too Many Requests</title>") {
				t.Errorf("one more request = %d %q, want 429 and nginx's error page", resp.StatusCode, body)
			}
			for _, h := range []string{"Retry-After", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Reset"} {
				if v, ok := resp.Header[h]; ok {
					t.Errorf("refusal header %s = %q, want none", h, v)
				}
			}
		})
	}
}

// TestToldTheLimitInProcess runs every in-process server against ratewise
// told its limit: no refusal, no failure, and against a token bucket
// exactly the ideal time.
func TestToldTheLimitInProcess(t *testing.T) {
	bucket := Scenario{Name: "told bucket", Rate: 10, Burst: 5, Workers: 5, Calls: 25}
	window := Scenario{Name: "told window", Limit: 8, Window: 10 * time.Second, Workers: 5, Calls: 20}
	told := contenderNamed(t, "ratewise told the limit")
	for _, api := range APIs() {
		if api.InProcess == nil {
			continue
		}
		t.Run(api.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := bucket
				if api.Model.Windowed() {
					s = window
				}
				s.Model = api.Model
				srv, err := api.InProcess(s)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				r := Run(context.Background(), s, told, srv, api.Ideal(s))
				if r.Received != s.Calls || r.Refused != 0 || r.Failed != 0 {
					t.Errorf("Run = %d received, %d refused, %d failed; want %d, 0, 0", r.Received, r.Refused, r.Failed, s.Calls)
				}
				// A leaky bucket's ideal counts one more than the burst it is
				// told: only the token buckets are exact.
				if (api.Model == TokenBucket || api.Model == GCRA) && r.Wall != r.Ideal {
					t.Errorf("Run took %v, want the ideal %v", r.Wall, r.Ideal)
				}
			})
		})
	}
}

// TestDefaultsLearnAMidSecondSlidingWindow runs ratewise's defaults
// against go-chi/httprate's sliding-window counter started a fraction of a
// second past a whole one, as every real server is: its X-RateLimit-Reset,
// a Unix time, is cut to the second, so each window turns a fraction of a
// second after the reset it names, and its Retry-After is the whole
// window. The defaults must still learn the counter's pace: within 10% of
// the ideal, at most 0.05 refused a call, no call failed.
func TestDefaultsLearnAMidSecondSlidingWindow(t *testing.T) {
	api := apiNamed(t, "go-chi/httprate")
	defaults := contenderNamed(t, "ratewise defaults")
	for _, s := range Scenarios() {
		if !api.Fits(s) {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				time.Sleep(time.Until(fakeStart))
				s.Model = api.Model
				srv, err := api.InProcess(s)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				r := Run(context.Background(), s, defaults, srv, api.Ideal(s))
				if r.WallRatio() > 1.10 || r.RefusedPerCall() > 0.05 || r.Failed != 0 {
					t.Errorf("%.2f of the ideal, %.3f refused a call, %d failed; want at most 1.10, 0.05, none",
						r.WallRatio(), r.RefusedPerCall(), r.Failed)
				}
			})
		})
	}
}

// contenderNamed is the contender of that name; the test stops when there
// is none.
func contenderNamed(t *testing.T, name string) Contender {
	t.Helper()
	all := Contenders()
	i := slices.IndexFunc(all, func(c Contender) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("no contender %q", name)
	}
	return all[i]
}
