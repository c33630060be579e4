package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
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
	if tt.s.Kind() == Window {
		n = tt.s.Limit
	}
	for i := range n {
		if resp, _ := get(t, srv.Transport(), srv.URL()); resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d of %d = %d, want 200", i+1, n, resp.StatusCode)
		}
	}
	checkRefused(t, tt, srv, n)
}

// checkRefused checks that the next request to srv, its limit of n
// spent, is refused as tt says, and the counts.
func checkRefused(t *testing.T, tt refusalTest, srv Server, n int) {
	t.Helper()
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

// tinyCap is a cap small enough to fill at once, whose requests are
// served long enough to be caught in service.
var tinyCap = Scenario{Name: "tiny cap", Limit: 3, Service: time.Second, Workers: 20, Calls: 20}

var capRefusalTests = []refusalTest{
	{api: "ratewisetest concurrency cap", s: tinyCap, header: map[string]string{
		"Retry-After": "", "X-Ratelimit-Limit": "", "X-Ratelimit-Remaining": "", "Ratelimit": "", "Ratelimit-Policy": "",
	}, body: `{"error":"rate limited"}`},
	{api: "go-chi/chi Throttle", s: tinyCap, header: map[string]string{
		"Retry-After": "", "X-Ratelimit-Limit": "", "X-Ratelimit-Remaining": "", "Ratelimit": "",
	}, body: "Server capacity exceeded.\n"},
}

// status sends one GET through rt and returns its status, or 0 and the
// error, for goroutines that may not stop the test.
func status(rt http.RoundTripper, url string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, url+"/items", nil)
	if err != nil {
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// TestCapRefusalsInProcess fills each in-process cap of 3 with requests
// being served, checks that a fourth is refused at once, and that once
// they are answered the next is admitted and served in the service time.
func TestCapRefusalsInProcess(t *testing.T) {
	for _, tt := range capRefusalTests {
		t.Run(tt.api, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv, err := apiNamed(t, tt.api).InProcess(tt.s)
				if err != nil {
					t.Fatal(err)
				}
				defer srv.Close()
				start := time.Now()
				var wg sync.WaitGroup
				for i := range tt.s.Limit {
					wg.Go(func() {
						if code, err := status(srv.Transport(), srv.URL()); code != http.StatusOK {
							t.Errorf("request %d of %d = %d, %v; want 200", i+1, tt.s.Limit, code, err)
						}
					})
				}
				synctest.Wait() // each is being served
				checkRefused(t, tt, srv, tt.s.Limit)
				if took := time.Since(start); took != 0 {
					t.Errorf("the refusal took %v, want none", took)
				}
				wg.Wait()
				if code, err := status(srv.Transport(), srv.URL()); code != http.StatusOK {
					t.Errorf("once they are answered, the next = %d, %v; want 200", code, err)
				}
				if took := time.Since(start); took != 2*tt.s.Service {
					t.Errorf("the next was answered at %v, want %v: two services", took, 2*tt.s.Service)
				}
			})
		})
	}
}

// TestShedServersInProcess sends 300 POSTs, one call each, to each
// in-process load shedder: about 2 in 3 are refused with its status and no
// hint, and a second server refuses as many.
func TestShedServersInProcess(t *testing.T) {
	s := Scenario{Name: "tiny shed", Shed: 2.0 / 3, Body: `{"n":1}`, Workers: 10, Calls: 300}
	for _, api := range APIs() {
		if api.Model != LoadShed {
			continue
		}
		t.Run(api.Name, func(t *testing.T) {
			var refused []int
			for range 2 {
				synctest.Test(t, func(t *testing.T) {
					srv, err := api.InProcess(s)
					if err != nil {
						t.Fatal(err)
					}
					defer srv.Close()
					r := Run(context.Background(), s, Plain(), srv, 0)
					if r.Received != 300 || r.Failed != r.Refused || r.Refused < 170 || r.Refused > 230 {
						t.Errorf("Run = %d received, %d refused, %d failed; want 300, about 200, as many", r.Received, r.Refused, r.Failed)
					}
					refused = append(refused, r.Refused)
					checkShedRefusal(t, api, srv, s.Body)
				})
			}
			if refused[0] != refused[1] {
				t.Errorf("two servers refused %d and %d, want as many: the draws are seeded", refused[0], refused[1])
			}
		})
	}
}

// checkShedRefusal posts body to srv until it is refused, and checks the
// refusal: the server's status, and no hint at all.
func checkShedRefusal(t *testing.T, api API, srv Server, body string) {
	t.Helper()
	for range 20 { // the draws are seeded: a refusal comes within the first few
		req, err := http.NewRequest(http.MethodPost, srv.URL()+"/items", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Transport().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			continue
		}
		if resp.StatusCode != api.refusalStatus() {
			t.Errorf("refusal = %d, want %d", resp.StatusCode, api.refusalStatus())
		}
		for _, h := range []string{"Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy"} {
			if v, ok := resp.Header[h]; ok {
				t.Errorf("refusal header %s = %q, want none", h, v)
			}
		}
		return
	}
	t.Error("20 requests in a row admitted, want 2 in 3 refused")
}

// TestFailingBehindThrottled checks the handler that fails a share of
// what throttled admits: about 5% of 2000 requests get a bare 503, the
// same ones each time, and the server refuses beside them as throttled
// does.
func TestFailingBehindThrottled(t *testing.T) {
	failures := func() []int {
		h := failing(failShare, okHandler)
		var out []int
		for i := range 2000 {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
			switch {
			case rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "":
				out = append(out, i)
			case rec.Code != http.StatusOK:
				t.Fatalf("request %d = %d %v, want 200 or a bare 503", i+1, rec.Code, rec.Header())
			}
		}
		return out
	}
	first := failures()
	if n := len(first); n < 70 || n > 130 {
		t.Errorf("%d of 2000 failed, want about 100", n)
	}
	if !slices.Equal(failures(), first) {
		t.Error("a second handler failed other requests: the draws are seeded")
	}
	synctest.Test(t, func(t *testing.T) {
		srv, err := apiNamed(t, "503s behind").InProcess(tinyBucket)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		r := Run(context.Background(), tinyBucket, Plain(), srv, 0)
		if r.Received != 20 || r.Refused != 15 || r.Failed < 15 {
			t.Errorf("Run = %d received, %d refused, %d failed; want 20, 15 as throttled, and those failed", r.Received, r.Refused, r.Failed)
		}
	})
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
// the run counted. The limits are slow enough (1/s, 5 per minute, 5 at
// once each served in 300ms) that none frees a place meanwhile; a queued
// leaky bucket answers its queue of 5 at 4/s. A load shedder, and the
// server that fails a share of what it admits, must count as they do in
// process: their draws are seeded.
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
			case ConcurrencyCap:
				s = Scenario{Name: "slow cap", Limit: 5, Service: 300 * time.Millisecond, Workers: 20, Calls: 20}
			case LoadShed:
				s = Scenario{Name: "shed", Shed: 2.0 / 3, Body: `{"n":1}`, Workers: 20, Calls: 20}
			}
			srv, err := api.Loopback(s)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r := Run(context.Background(), s, Plain(), srv, api.Ideal(s))
			want := Result{Received: 20, Refused: 20 - admitted, Failed: 20 - admitted}
			if api.Model == LoadShed || strings.Contains(api.Name, "503s") {
				synctest.Test(t, func(t *testing.T) {
					in, err := api.InProcess(s)
					if err != nil {
						t.Fatal(err)
					}
					defer in.Close()
					want = Run(context.Background(), s, Plain(), in, 0)
				})
			}
			if r.Received != want.Received || r.Refused != want.Refused || r.Failed != want.Failed || r.Cut {
				t.Errorf("Run = %d received, %d refused, %d failed, cut %v; want %d, %d, %d, not cut",
					r.Received, r.Refused, r.Failed, r.Cut, want.Received, want.Refused, want.Failed)
			}
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
