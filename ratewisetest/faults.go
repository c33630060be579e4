package ratewisetest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// This file answers a request with the fault drawn for it.

// faultBody is the 200 body the body faults send, or half of it.
var faultBody = strings.Repeat("ratewisetest fault body ", FaultBodySize/24+1)[:FaultBodySize]

// defaultSlowBodyDelay is what a zero Config.SlowBodyDelay means.
const defaultSlowBodyDelay = 20 * time.Millisecond

// bodyBreaker is the in-process [Bucket]'s writer: it has no connection to
// reset or close, so it ends the body it hands back with err instead.
type bodyBreaker interface {
	breakBody(err error)
}

// answerFault answers with f. sleep waits between the pieces of a slow
// body and reports whether it waited (false: the client or server is
// gone).
func (a *api) answerFault(w http.ResponseWriter, r *http.Request, f Fault, sleep func(context.Context, time.Duration) bool) {
	switch f {
	case Fault503:
		w.WriteHeader(http.StatusServiceUnavailable)
	case FaultReset:
		fakehttp.Reset(w)
	case Fault429, Fault429NoHint:
		if f == Fault429 {
			wait := a.cfg.FaultRetryAfter
			if wait == 0 {
				wait = time.Second
			}
			if ra := retryAfter(a.cfg.RetryAfter, time.Now(), wait); ra != "" {
				w.Header().Set("Retry-After", ra)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, limitedBody)
	case FaultResetAfterHeaders, FaultTruncatedBody:
		w.Header().Set("Content-Length", strconv.Itoa(FaultBodySize))
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, faultBody[:FaultBodySize/2])
		if b, ok := w.(bodyBreaker); ok {
			if f == FaultTruncatedBody {
				b.breakBody(io.ErrUnexpectedEOF)
			} else {
				b.breakBody(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
			}
			return
		}
		_ = http.NewResponseController(w).Flush()
		if f == FaultResetAfterHeaders {
			fakehttp.Reset(w)
		}
		// A handler that returns short of its Content-Length makes net/http
		// close the connection: the client reads io.ErrUnexpectedEOF.
	case FaultSlowBody:
		delay := a.cfg.SlowBodyDelay
		if delay == 0 {
			delay = defaultSlowBodyDelay
		}
		w.Header().Set("Content-Length", strconv.Itoa(FaultBodySize))
		w.WriteHeader(http.StatusOK)
		const pieces = 4
		for i := range pieces {
			if i > 0 && !sleep(r.Context(), delay) {
				panic(http.ErrAbortHandler)
			}
			_, _ = io.WriteString(w, faultBody[i*FaultBodySize/pieces:(i+1)*FaultBodySize/pieces])
			_ = http.NewResponseController(w).Flush()
		}
	}
}
