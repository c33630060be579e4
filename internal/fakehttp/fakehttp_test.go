package fakehttp

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCeilSeconds(t *testing.T) {
	tests := []struct {
		give time.Duration
		want int64
	}{
		{give: -time.Second, want: 0},
		{give: 0, want: 0},
		{give: time.Nanosecond, want: 1},
		{give: time.Second, want: 1},
		{give: time.Second + time.Nanosecond, want: 2},
		{give: 1999 * time.Millisecond, want: 2},
	}
	for _, tt := range tests {
		if got := CeilSeconds(tt.give); got != tt.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for give, want := range map[time.Duration]string{time.Nanosecond: "1", 0: "1", 999 * time.Millisecond: "1", 1001 * time.Millisecond: "2"} {
		if got := RetryAfterSeconds(give); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %q, want %q", give, got, want)
		}
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 250_000_000, time.FixedZone("CET", 3600))
	// 12:00:00.25 CET + 0.75s is exactly 11:00:01 UTC.
	for give, want := range map[time.Duration]string{750 * time.Millisecond: "Sat, 01 Mar 2025 11:00:01 GMT", 800 * time.Millisecond: "Sat, 01 Mar 2025 11:00:02 GMT"} {
		if got := RetryAfterDate(now, give); got != want {
			t.Errorf("RetryAfterDate(now, %v) = %q, want %q", give, got, want)
		}
	}
}

func TestLoopbackAndReset(t *testing.T) {
	ts := StartLoopback("test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/reset" {
			Reset(w)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer ts.Close()
	if got := ts.Listener.Addr().String(); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("listening on %s, want 127.0.0.1", got)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(ts.URL + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, err := c.Get(ts.URL + "/reset"); err == nil {
		resp.Body.Close()
		t.Error("a reset connection gave a response")
	}
}
