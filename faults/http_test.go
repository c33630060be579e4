package faults

import (
	"context"
	"errors"
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
		c := tg.client()
		data, body := payload(32<<10), payload(24<<10)
		o := tg.get(t, c, len(data), deadline)
		tg.wantWhole(t, "GET", o, data)
		if o.took < latency/2 {
			t.Errorf("GET took %v through a latency of %v ± 50ms: the toxic did not act", o.took, latency)
		}
		tg.wantEcho(t, "POST", tg.post(t, c, body, "", deadline), body)
		if whole := tg.wantNoWrongBody(t, body); whole != 1 {
			t.Errorf("the server read the POST's body %d times, want 1", whole)
		}
		if n := tg.attempts.Load(); n != 2 {
			t.Errorf("%d attempts for two calls that succeeded, want 2", n)
		}
	})
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
