package ratewisetest

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/jarcoal/httpmock"
)

// RateLimited returns an [httpmock.Responder] that answers 429 with the
// given Retry-After header value ("" means no header) and a small JSON
// body. Each call returns a new response, with its own body and header
// map, so callers may read and change it freely. It is safe for concurrent
// use.
func RateLimited(retryAfter string) httpmock.Responder {
	return func(req *http.Request) (*http.Response, error) {
		resp := httpmock.NewStringResponse(http.StatusTooManyRequests, limitedBody)
		resp.Header.Set("Content-Type", "application/json")
		if retryAfter != "" {
			resp.Header.Set("Retry-After", retryAfter)
		}
		resp.Request = req
		return resp, nil
	}
}

// RateLimitedThen returns an [httpmock.Responder] that answers the first n
// calls with [RateLimited](retryAfter) and every later call with then. It
// is safe for concurrent use; under concurrency, which calls are the first
// n is the order in which they reach the responder. It panics if then is
// nil.
func RateLimitedThen(n int, retryAfter string, then httpmock.Responder) httpmock.Responder {
	if then == nil {
		panic("ratewisetest: RateLimitedThen needs a non-nil then responder")
	}
	limited := RateLimited(retryAfter)
	var (
		mu    sync.Mutex
		calls int // guarded by mu
	)
	return func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		i := calls
		calls++
		mu.Unlock()
		// then is user code: call it outside the lock.
		if i < n {
			return limited(req)
		}
		return then(req)
	}
}

// Sequence returns an [httpmock.Responder] that answers with each of
// responders in turn; the last one answers every later call. It is safe
// for concurrent use. It panics when given no responders or a nil one.
func Sequence(responders ...httpmock.Responder) httpmock.Responder {
	if len(responders) == 0 {
		panic("ratewisetest: Sequence needs at least one responder")
	}
	for i, r := range responders {
		if r == nil {
			panic(fmt.Sprintf("ratewisetest: Sequence responder %d is nil", i))
		}
	}
	rs := append([]httpmock.Responder(nil), responders...)
	var (
		mu   sync.Mutex
		next int // guarded by mu
	)
	return func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		r := rs[next]
		if next < len(rs)-1 {
			next++
		}
		mu.Unlock()
		return r(req)
	}
}
