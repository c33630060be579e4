// Package fakehttp holds what the fake APIs of ratewisetest and
// kanbanize/kanbanizetest share: how they write Retry-After, reset a
// connection and listen on loopback.
package fakehttp

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"
)

// RetryAfterSeconds is a Retry-After of wait in whole seconds, rounded up,
// at least 1.
func RetryAfterSeconds(wait time.Duration) string {
	return strconv.FormatInt(max(CeilSeconds(wait), 1), 10)
}

// RetryAfterDate is a Retry-After telling a client refused at now to come
// back after wait, as an IMF-fixdate rounded up to the next whole second.
func RetryAfterDate(now time.Time, wait time.Duration) string {
	t := now.Add(wait)
	r := t.Truncate(time.Second)
	if r.Before(t) {
		r = r.Add(time.Second)
	}
	return r.UTC().Format(http.TimeFormat)
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Reset closes the connection under w with a TCP reset, or aborts the
// handler where it cannot (HTTP/2, or in process).
func Reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // so that Close sends RST rather than FIN
	}
	_ = conn.Close()
}

// StartLoopback serves h on 127.0.0.1. It listens itself, since
// httptest.NewServer may pick [::1] or the address of its -httptest.serve
// flag, and panics, naming owner, when it cannot.
func StartLoopback(owner string, h http.Handler) *httptest.Server {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("%s: cannot listen on 127.0.0.1: %v", owner, err))
	}
	ts := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	ts.Start()
	return ts
}
