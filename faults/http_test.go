package faults

import (
	"context"
	"errors"
	"github.com/ratewise/ratewise"
	"io"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file has one test per toxic, each over HTTP/1.1 and HTTP/2 and in
// both directions: downstream breaks what the server sends, upstream what
// the client sends.

// eachTarget runs f for each protocol and stream, in parallel, each with a
// target of its own carrying x on that stream.
func eachTarget(t *testing.T, x toxic, f func(t *testing.T, tg *target)) {
	for _, proto := range protocols {
		for _, stream := range streams {
			t.Run(proto+"/"+stream, func(t *testing.T) {
				t.Parallel()
				tg := startTarget(t, proto)
				tg.stream = stream
				x := x
				x.Stream = stream
				tg.proxy.add(t, x)
				f(t, tg)
			})
		}
	}
}

// A slow link slows the calls down and changes nothing else.
func TestLatency(t *testing.T) {
	const latency = 100 * time.Millisecond
	x := toxic{Type: "latency", Attributes: map[string]any{"latency": latency.Milliseconds(), "jitter": 50}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		if o := wantPassesIntact(t, tg, 32<<10); o.took < latency/2 {
			t.Errorf("GET took %v through a latency of %v ± 50ms: the toxic did not act", o.took, latency)
		}
	})
}

// wantPassesIntact asserts that a GET of n bytes and a POST of as many
// pass whole, each in one attempt, and returns the GET's outcome.
func wantPassesIntact(t *testing.T, tg *target, n int) outcome {
	t.Helper()
	c := tg.client()
	data, body := payload(n), payload(n)
	o := tg.get(t, c, len(data), deadline)
	tg.wantWhole(t, "GET", o, data)
	tg.wantEcho(t, "POST", tg.post(t, c, body, "", deadline), body)
	if whole := tg.wantNoWrongBody(t, body); whole != 1 {
		t.Errorf("the server read the POST's body %d times, want 1", whole)
	}
	if n := tg.attempts.Load(); n != 2 {
		t.Errorf("%d attempts for two calls that succeeded, want 2", n)
	}
	return o
}

// A narrow link (64 KB/s) brings every byte, late; a deadline that ends
// mid-transfer ends the call with the context's error, never a shorter
// body.
func TestBandwidth(t *testing.T) {
	x := toxic{Type: "bandwidth", Attributes: map[string]any{"rate": 64}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		c := tg.client()
		data, body := payload(8<<10), payload(8<<10)
		tg.wantWhole(t, "GET", tg.get(t, c, len(data), deadline), data)
		tg.wantEcho(t, "POST", tg.post(t, c, body, "", deadline), body)

		if whole := tg.wantNoWrongBody(t, body); whole != 1 {
			t.Errorf("the server read the POST's body %d times, want 1", whole)
		}

		// 64 KiB take a second at 64 KB/s: a deadline of 300ms ends
		// them on the way, a response's body downstream, a request's
		// upstream.
		big := payload(64 << 10)
		what, o := "GET cut by its deadline", tg.get(t, c, len(big), 300*time.Millisecond)
		if tg.stream == "upstream" {
			what, o = "POST cut by its deadline", tg.post(t, c, big, "", 300*time.Millisecond)
		}
		if !errors.Is(o.err, context.DeadlineExceeded) {
			t.Errorf("%s: status %d, %d bytes, error %v; want an error matching context.DeadlineExceeded", what, o.status, len(o.body), o.err)
		}
		if whole, _ := tg.received.only(big); whole != 0 {
			t.Errorf("the server read whole a body cut by its deadline")
		}
	})
}

// A link that lingers before it closes changes nothing a caller sees.
func TestSlowClose(t *testing.T) {
	x := toxic{Type: "slow_close", Attributes: map[string]any{"delay": 500}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		c := tg.client()
		data, body := payload(32<<10), payload(24<<10)
		tg.wantWhole(t, "GET", tg.get(t, c, len(data), deadline), data)
		tg.wantEcho(t, "POST", tg.post(t, c, body, "", deadline), body)
		c.CloseIdleConnections() // the closes the toxic delays
		tg.wantWhole(t, "GET on a new connection", tg.get(t, c, len(data), deadline), data)
		if whole := tg.wantNoWrongBody(t, body); whole != 1 {
			t.Errorf("the server read the POST's body %d times, want 1", whole)
		}
	})
}

// Bytes trickled in small pieces (64 ± 32 bytes, 200µs apart) make the
// same bodies: framing holds across any split.
func TestSlicer(t *testing.T) {
	x := toxic{Type: "slicer", Attributes: map[string]any{"average_size": 64, "size_variation": 32, "delay": 200}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		wantPassesIntact(t, tg, 8<<10)
	})
}

// A host that takes the connection and then says nothing (a black hole):
// each attempt ends at the base transport's header timeout, the calls end
// within their deadline, a POST is sent once, and the breaker takes the
// host for down after its three failures and refuses at once.
func TestBlackHole(t *testing.T) {
	x := toxic{Type: "timeout", Attributes: map[string]any{"timeout": 0}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		wantHostDown(t, tg)
	})
}

// A host that resets the connection at once: the same as a black hole,
// sooner.
func TestResetPeer(t *testing.T) {
	x := toxic{Type: "reset_peer", Attributes: map[string]any{"timeout": 0}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		wantHostDown(t, tg)
	})
}

// wantHostDown asserts what a caller sees of a host whose every
// connection fails: a POST without a key is sent once and fails; a GET
// fails after its retries; and the breaker, open after three failures,
// refuses the next call without sending it.
func wantHostDown(t *testing.T, tg *target) {
	t.Helper()
	var opened []ratewise.BreakerChange
	var mu sync.Mutex
	breaker := faultBreaker
	breaker.OnStateChange = func(ch ratewise.BreakerChange) {
		mu.Lock()
		opened = append(opened, ch)
		mu.Unlock()
	}
	// A silent attempt ends at the header timeout: shorter than for the
	// toxics that let bytes pass, so that three attempts fit the deadline.
	tg.base.ResponseHeaderTimeout = 300 * time.Millisecond
	tg.base.TLSHandshakeTimeout = 300 * time.Millisecond
	c := tg.client(ratewise.WithBreaker(breaker))
	body := payload(8 << 10)

	o := tg.post(t, c, body, "", deadline)
	if o.err == nil || o.readErr {
		t.Errorf("POST: status %d, error %v; want an error and no response", o.status, o.err)
	}
	if n := tg.attempts.Load(); n != 1 {
		t.Errorf("POST without an Idempotency-Key: %d attempts, want 1", n)
	}
	o = tg.get(t, c, 1024, deadline)
	if o.err == nil || o.readErr {
		t.Errorf("GET: status %d, error %v; want an error and no response", o.status, o.err)
	}
	sent := tg.attempts.Load()
	if sent < 3 {
		t.Errorf("%d attempts for a POST and a GET, want the GET retried", sent)
	}
	o = tg.get(t, c, 1024, deadline)
	var open *ratewise.CircuitOpenError
	if !errors.As(o.err, &open) {
		t.Errorf("GET after %d failed attempts: error %v, want a *ratewise.CircuitOpenError", sent, o.err)
	} else if o.took > 500*time.Millisecond { // at once: nothing is sent; the bound is for a loaded machine
		t.Errorf("the open breaker refused after %v, want at once", o.took)
	}
	if n := tg.attempts.Load(); n != sent {
		t.Errorf("%d attempts sent through an open breaker", n-sent)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(opened) == 0 || opened[0].To != ratewise.BreakerOpen {
		t.Errorf("breaker changes %v, want it opened", opened)
	}
	if whole, _ := tg.received.only(body); whole > 1 {
		t.Errorf("the server read the POST's body %d times", whole)
	}
}

// A connection cut after its first 10 bytes, before any header is whole:
// for a caller, a host that is down.
func TestLimitDataBeforeHeaders(t *testing.T) {
	x := toxic{Type: "limit_data", Attributes: map[string]any{"bytes": 10}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		wantHostDown(t, tg)
	})
}

// A connection cut after 16,000 bytes, in the middle of a 64 KiB body.
// Downstream, the response has come and its body is cut: the caller's
// read fails, never a shorter success. Upstream, the request's body is
// cut: a POST is not sent again, one with an Idempotency-Key is, and the
// server never reads whole a body other than the one sent.
func TestLimitDataMidBody(t *testing.T) {
	x := toxic{Type: "limit_data", Attributes: map[string]any{"bytes": 16000}}
	eachTarget(t, x, func(t *testing.T, tg *target) {
		c := tg.client()
		big := payload(64 << 10)
		if tg.stream == "downstream" {
			o := tg.get(t, c, len(big), deadline)
			if !o.readErr || o.status != http.StatusOK || len(o.body) >= len(big) {
				t.Errorf("GET cut mid-body: status %d, %d bytes of %d, error %v (while reading: %v); want a read error", o.status, len(o.body), len(big), o.err, o.readErr)
			}
			// How the cut reads depends on how the proxy's close meets the
			// bytes in flight: the body's end comes too soon, or the
			// connection is reset.
			if !errors.Is(o.err, io.ErrUnexpectedEOF) && !errors.Is(o.err, syscall.ECONNRESET) {
				t.Errorf("GET cut mid-body: %v, want io.ErrUnexpectedEOF or a reset", o.err)
			}
			return
		}
		small := payload(1024)
		tg.wantWhole(t, "GET of 1 KiB", tg.get(t, c, len(small), deadline), small)
		before := tg.attempts.Load()
		o := tg.post(t, c, big, "", deadline)
		if o.err == nil || o.readErr {
			t.Errorf("POST cut mid-body: status %d, error %v; want an error and no response", o.status, o.err)
		}
		if n := tg.attempts.Load() - before; n != 1 {
			t.Errorf("POST without an Idempotency-Key cut mid-body: %d attempts, want 1", n)
		}
		before = tg.attempts.Load()
		o = tg.post(t, c, big, "key-1", deadline)
		if o.err == nil || o.readErr {
			t.Errorf("POST with a key cut mid-body: status %d, error %v; want an error and no response", o.status, o.err)
		}
		if n := tg.attempts.Load() - before; n < 2 {
			t.Errorf("POST with an Idempotency-Key cut mid-body: %d attempts, want it sent again", n)
		}
		if whole := tg.wantNoWrongBody(t, big); whole != 0 {
			t.Errorf("the server read whole %d bodies cut at 16,000 bytes", whole)
		}
	})
}
