package ratewisetest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// This file holds the faults and answers a request with the fault drawn
// for it.

// Fault is a failure the server injects in place of the handler's answer.
type Fault int

const (
	// Fault503 answers 503 Service Unavailable with an empty body and no
	// Retry-After.
	Fault503 Fault = iota
	// FaultReset resets the connection before any byte of a response is
	// sent, so the client gets a network error and no response. Note that
	// [http.Transport] may retry an idempotent request once after a reset on
	// a reused connection, so the server can receive more requests than the
	// client sent.
	FaultReset
	// Fault429 answers 429 with a Retry-After of Config.FaultRetryAfter,
	// in the form Config.RetryAfter says (in seconds for
	// RetryAfterWindow), as an API does when another of its limits (not
	// the one Config.Model keeps) refuses.
	Fault429
	// Fault429NoHint answers 429 with no Retry-After nor any rate-limit
	// header: the client must back off on its own.
	Fault429NoHint
	// FaultResetAfterHeaders sends 200 headers and half of a body of
	// FaultBodySize bytes, then resets the connection: the client gets a
	// response whose body read fails.
	FaultResetAfterHeaders
	// FaultTruncatedBody sends 200 with a Content-Length of FaultBodySize
	// and half of the body, then closes the connection: the body read ends
	// in io.ErrUnexpectedEOF.
	FaultTruncatedBody
	// FaultSlowBody sends 200 and a body of FaultBodySize bytes in four
	// pieces, Config.SlowBodyDelay apart.
	FaultSlowBody
)

// FaultBodySize is the length of the 200 body the body faults send or
// announce.
const FaultBodySize = 1024

// allFaults is what an empty Config.Faults means.
var allFaults = []Fault{Fault503, FaultReset, Fault429, Fault429NoHint, FaultResetAfterHeaders, FaultTruncatedBody, FaultSlowBody}

// String returns the constant's name, such as "Fault503".
func (f Fault) String() string {
	switch f {
	case Fault503:
		return "Fault503"
	case FaultReset:
		return "FaultReset"
	case Fault429:
		return "Fault429"
	case Fault429NoHint:
		return "Fault429NoHint"
	case FaultResetAfterHeaders:
		return "FaultResetAfterHeaders"
	case FaultTruncatedBody:
		return "FaultTruncatedBody"
	case FaultSlowBody:
		return "FaultSlowBody"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

func (f Fault) valid() bool {
	return f >= Fault503 && f <= FaultSlowBody
}

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
			mode := a.cfg.RetryAfter
			if mode == RetryAfterWindow {
				mode = RetryAfterSeconds // the fault's wait, not the window's
			}
			if ra := retryAfter(mode, time.Now(), wait, 0); ra != "" {
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
