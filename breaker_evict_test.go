package ratewise

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestBreakerEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		byPath := func(r *http.Request) string { return r.URL.Path }
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.URL.Path, "/bad") {
				return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		tr := breakerTransport(base, BreakerPolicy{ConsecutiveFailures: 20, Cooldown: time.Minute,
			IdleTimeout: time.Minute, Key: byPath})
		send := func(path string) {
			req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				_ = resp.Body.Close()
			}
		}
		// A key failing every 10s keeps its count, however many other keys
		// come and go meanwhile.
		for i := range 19 {
			send("/bad")
			send(fmt.Sprintf("/other/%d", i))
			time.Sleep(10 * time.Second)
		}
		if got := tr.KeyStatus("/bad").Breaker.ConsecutiveFailures; got != 19 {
			t.Fatalf("/bad counts %d failures in a row, want 19", got)
		}
		send("/bad")
		if st := tr.KeyStatus("/bad").Breaker; st.State != BreakerOpen {
			t.Fatalf("after 20 failures: %v, want open", st.State)
		}
		// Open breakers are kept through their cooldown, then go once idle.
		for i := range 5 {
			time.Sleep(30 * time.Second)
			send(fmt.Sprintf("/later/%d", i))
		}
		if tr.breakers.Kept("/bad") {
			t.Errorf("the /bad breaker, its cooldown long over and idle for 2m30s, is still held")
		}
		if n := tr.breakers.Len(); n > 4 {
			t.Errorf("%d breakers held, want at most the few used lately", n)
		}
	})
}

// TestBreakerForgetsAStaleStreak: a closed breaker whose key failed and
// then went quiet is forgotten once idle, unless a failure window longer
// than the idle time still needs its failures.
func TestBreakerForgetsAStaleStreak(t *testing.T) {
	for _, tt := range []struct {
		policy BreakerPolicy
		kept   bool
	}{
		{policy: BreakerPolicy{IdleTimeout: time.Minute}},
		{policy: BreakerPolicy{IdleTimeout: time.Minute, WindowFailures: 3, Window: 30 * time.Second}},
		{policy: BreakerPolicy{IdleTimeout: time.Minute, WindowFailures: 3, Window: time.Hour}, kept: true},
	} {
		synctest.Test(t, func(t *testing.T) {
			byPath := func(r *http.Request) string { return r.URL.Path }
			base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.URL.Path == "/failed-once" {
					return &http.Response{StatusCode: 503, Body: http.NoBody}, nil
				}
				return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
			})
			p := tt.policy
			p.Key = byPath
			tr := breakerTransport(base, p)
			send := func(path string) {
				req, _ := http.NewRequest(http.MethodGet, "https://api.example.com"+path, nil)
				if resp, err := tr.RoundTrip(req); err == nil {
					_ = resp.Body.Close()
				}
			}
			send("/failed-once")
			for i := range 8 {
				time.Sleep(30 * time.Second)
				send(fmt.Sprintf("/other/%d", i))
			}
			if kept := tr.breakers.Kept("/failed-once"); kept != tt.kept {
				t.Errorf("Window %v: the breaker of a key that failed once, idle 4m, is kept: %v, want %v", p.Window, kept, tt.kept)
			}
		})
	}
}
