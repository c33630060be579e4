package ratewise_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file counts what the soak sends and closes: every body read and
// closed, every connection dialled and closed.

// waitFor polls cond for up to five seconds: connections close in the
// background after the transport lets them go.
func waitFor(cond func() bool) {
	for deadline := time.Now().Add(5 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// countingBase is the base RoundTripper of the soak: it counts the bodies
// it hands out and closes, and notes a non-idempotent request sent again
// after a network error.
type countingBase struct {
	base           *http.Transport
	opened, closed atomic.Int64
	netErrors      atomic.Int64

	mu         sync.Mutex
	netErrored map[string]bool // calls whose attempt ended in a network error
	breaches   []string
}

func (b *countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	call := req.Header.Get("X-Soak-Call")
	replayable := req.Method == http.MethodGet || req.Method == http.MethodPut || req.Header.Get("Idempotency-Key") != ""
	b.mu.Lock()
	if b.netErrored[call] && !replayable {
		b.breaches = append(b.breaches, fmt.Sprintf("call %s (%s) sent again after a network error", call, req.Method))
	}
	b.mu.Unlock()

	resp, err := b.base.RoundTrip(req)
	if err != nil {
		b.netErrors.Add(1)
		b.mu.Lock()
		b.netErrored[call] = true
		b.mu.Unlock()
		return nil, err
	}
	b.opened.Add(1)
	resp.Body = &countedBody{ReadCloser: resp.Body, closed: &b.closed}
	return resp, nil
}

func (b *countingBase) CloseIdleConnections() { b.base.CloseIdleConnections() }

func (b *countingBase) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.breaches)
}

// countedBody counts its first Close.
type countedBody struct {
	io.ReadCloser
	once   sync.Once
	closed *atomic.Int64
}

func (c *countedBody) Close() error {
	c.once.Do(func() { c.closed.Add(1) })
	return c.ReadCloser.Close()
}

// countingDialer dials the soak server whatever the host, and counts the
// connections open.
type countingDialer struct {
	addr         string
	open, dialed atomic.Int64
}

func (d *countingDialer) DialContext(ctx context.Context, network, _ string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, d.addr)
	if err != nil {
		return nil, err
	}
	d.open.Add(1)
	d.dialed.Add(1)
	return &countedConn{Conn: c, open: &d.open}, nil
}

type countedConn struct {
	net.Conn
	once sync.Once
	open *atomic.Int64
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}
