package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratewise/ratewise"
)

// This file is the HTTP side of the fault tests: a Go server, over
// HTTP/1.1 or over HTTP/2 (TLS), behind a toxiproxy proxy, and a ratewise
// client of it that counts the attempts it sends.

// protocols are the HTTP versions each toxic is tried over.
var protocols = []string{"http1", "http2"}

// payload is the body /data serves and the tests post: n bytes that are
// not all alike, so that a byte out of place shows.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// received is what /echo was sent: the bodies it read whole, by their
// hash, and how many it read only in part.
type received struct {
	mu      sync.Mutex
	whole   map[[32]byte]int
	partial int
}

func (r *received) note(body []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.partial++
		return
	}
	r.whole[sha256.Sum256(body)]++
}

// only reports whether every body read whole was want, and how many were.
func (r *received) only(want []byte) (n int, others int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := sha256.Sum256(want)
	for k, c := range r.whole {
		if k == h {
			n += c
		} else {
			others += c
		}
	}
	return n, others
}

// target is a Go server behind a proxy: its URL is the proxy's.
type target struct {
	proto    string
	stream   string // the direction the test's toxic breaks
	server   *httptest.Server
	proxy    *proxy
	url      string
	base     *http.Transport
	received *received
	attempts atomic.Int64 // requests ratewise handed its base transport
	sent     arrivals     // when it handed each
}

// startTarget starts the server over proto ("http1" or "http2") and a
// proxy in front of it, both stopped when the test ends.
func startTarget(t *testing.T, proto string) *target {
	t.Helper()
	tg := &target{proto: proto, received: &received{whole: map[[32]byte]int{}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /data", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(payload(n))
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		tg.received.note(body, err)
		if err != nil {
			return
		}
		sum := sha256.Sum256(body)
		_, _ = w.Write(sum[:])
	})
	tg.server = httptest.NewUnstartedServer(mux)
	// The toxics break handshakes and requests on purpose: the server's
	// complaints about them are noise.
	tg.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	if proto == "http2" {
		tg.server.EnableHTTP2 = true
		tg.server.StartTLS()
	} else {
		tg.server.Start()
	}
	t.Cleanup(tg.server.Close)
	tg.proxy = startProxy(t, tg.server.Listener.Addr().String())

	tg.base = tg.server.Client().Transport.(*http.Transport).Clone()
	// What a careful user sets: an attempt whose answer does not start
	// within this is a network error, retried if it may be and counted by
	// the breaker; a black-holed host does not hold a call forever. Far
	// above what the toxics that let bytes pass add, on a loaded machine
	// too; wantHostDown shortens it.
	tg.base.ResponseHeaderTimeout = 2 * time.Second
	tg.base.TLSHandshakeTimeout = 2 * time.Second
	t.Cleanup(tg.base.CloseIdleConnections)
	scheme := "http://"
	if proto == "http2" {
		scheme = "https://"
	}
	tg.url = scheme + tg.proxy.Addr
	return tg
}

// countingTransport counts the attempts ratewise sends, and notes when.
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
	sent *arrivals
}

func (c countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.sent.note()
	return c.base.RoundTrip(req)
}

// faultPolicy is the retry policy of the fault tests: short backoffs, a
// wait budget of a second.
var faultPolicy = ratewise.RetryPolicy{InitialDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond, TotalWaitCap: time.Second}

// faultBreaker opens a host's breaker after three failures in a row, and
// refuses at once while it is open.
var faultBreaker = ratewise.BreakerPolicy{ConsecutiveFailures: 3, Cooldown: time.Minute, FailFast: true}

// client returns a ratewise client of the target with the fault tests'
// policies, and opts after them.
func (tg *target) client(opts ...ratewise.Option) *http.Client {
	all := append([]ratewise.Option{ratewise.WithRetry(faultPolicy), ratewise.WithBreaker(faultBreaker)}, opts...)
	return &http.Client{Transport: ratewise.New(countingTransport{base: tg.base, n: &tg.attempts, sent: &tg.sent}, all...)}
}

// outcome is what a caller saw of one call: the status (0 with no
// response), the body it read, the error of the call or of the body's
// read, and how long it all took.
type outcome struct {
	status  int
	body    []byte
	err     error
	readErr bool // err came while reading the body, after a response
	proto   int  // the response's major HTTP version
	took    time.Duration
}

// deadline bounds every call of the fault tests but those that set a
// shorter one: the wait budget (a second) and the attempts' timeouts fit
// well inside.
const deadline = 4 * time.Second

// slack is what a call may take past its deadline or its budget: the
// issue's bound, one second.
const slack = time.Second

// do makes one call with a deadline of d and reads its whole body.
func do(t *testing.T, c *http.Client, req *http.Request, d time.Duration) outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), d)
	defer cancel()
	start := time.Now()
	resp, err := c.Do(req.WithContext(ctx))
	o := outcome{err: err}
	if err == nil {
		o.status, o.proto = resp.StatusCode, resp.ProtoMajor
		o.body, o.err = io.ReadAll(resp.Body)
		o.readErr = o.err != nil
		resp.Body.Close()
	}
	o.took = time.Since(start)
	if o.took > d+slack {
		t.Errorf("%s %s took %v, past its deadline of %v by more than %v", req.Method, req.URL.Path, o.took, d, slack)
	}
	return o
}

// get calls GET /data for n bytes.
func (tg *target) get(t *testing.T, c *http.Client, n int, d time.Duration) outcome {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, tg.url+"/data?n="+strconv.Itoa(n), nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, c, req, d)
}

// post calls POST /echo with body; key, when set, is its Idempotency-Key.
func (tg *target) post(t *testing.T, c *http.Client, body []byte, key string, d time.Duration) outcome {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.url+"/echo", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return do(t, c, req, d)
}

// wantWhole asserts a call that succeeded with the whole body want, over
// the target's protocol.
func (tg *target) wantWhole(t *testing.T, what string, o outcome, want []byte) {
	t.Helper()
	switch {
	case o.err != nil:
		t.Errorf("%s: %v after %v, want the whole body", what, o.err, o.took)
	case o.status != http.StatusOK:
		t.Errorf("%s: status %d, want 200", what, o.status)
	case !bytes.Equal(o.body, want):
		t.Errorf("%s: a body of %d bytes, not the %d sent", what, len(o.body), len(want))
	}
	if wantProto := map[string]int{"http1": 1, "http2": 2}[tg.proto]; o.err == nil && o.proto != wantProto {
		t.Errorf("%s: answered over HTTP/%d, want HTTP/%d", what, o.proto, wantProto)
	}
}

// wantEcho asserts a POST of body that succeeded, answered with the hash
// of the body the server read.
func (tg *target) wantEcho(t *testing.T, what string, o outcome, body []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	tg.wantWhole(t, what, o, sum[:])
}

// wantNoWrongBody asserts that the server never read whole a body other
// than want: a body is replayed byte for byte or not at all.
func (tg *target) wantNoWrongBody(t *testing.T, want []byte) (whole int) {
	t.Helper()
	whole, others := tg.received.only(want)
	if others > 0 {
		t.Errorf("the server read %d whole bodies that differ from the one sent", others)
	}
	return whole
}
