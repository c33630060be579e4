package ratewisetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"time"
)

// Bucket is the rate-limited API of a [Server] as an [http.RoundTripper]
// that answers in the caller's goroutine, with no network: the same limits,
// headers, faults and counts. It starts no goroutine, so inside a
// testing/synctest bubble its waits take no real time (see "Bucket" in the
// package doc). Create it with [NewBucket]; it is safe for concurrent use.
type Bucket struct {
	api *api
}

// NewBucket returns the API cfg describes. It panics with the error of
// [Config.Validate] when cfg is invalid.
func NewBucket(cfg Config) *Bucket {
	return &Bucket{api: newAPI(cfg)}
}

// RoundTrip answers req.
func (b *Bucket) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	rec := &recorder{ResponseRecorder: httptest.NewRecorder()}
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			// Abandoned during the latency, or a connection reset.
			resp, err = nil, req.Context().Err()
			if err == nil {
				err = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
			}
		}
	}()
	// The handler gets a request as a server would: its own copy, never
	// the caller's, with a body to read.
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	b.api.serve(rec, in, func(ctx context.Context, d time.Duration) bool { return sleep(ctx, d, nil) })
	resp = rec.Result()
	resp.Request = req
	if rec.bodyErr != nil {
		resp.Body = io.NopCloser(io.MultiReader(resp.Body, errReader{rec.bodyErr}))
	}
	return resp, nil
}

// recorder records an answer in process; a body fault makes the body it
// hands back end in an error, as a broken connection would.
type recorder struct {
	*httptest.ResponseRecorder
	bodyErr error
}

func (r *recorder) breakBody(err error) { r.bodyErr = err }

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Stats returns a snapshot of the counters.
func (b *Bucket) Stats() Stats { return b.api.stats() }

// Arrivals returns when each request arrived, in order. The slice is a
// copy.
func (b *Bucket) Arrivals() []time.Time { return b.api.arrivalTimes() }

// sleep waits d, or less when ctx ends or done closes first (never, when
// nil), and reports whether it waited it out.
func sleep(ctx context.Context, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-done:
		return false
	}
}
