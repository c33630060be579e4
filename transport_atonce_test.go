package ratewise

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/internal/learn"
)

// These tests follow the first attempt of a call that no layer holds
// back (transport.go's holdsNothingBack): with a breaker and concurrency
// caps it goes without the call's bookkeeping (sendAtOnce), and must keep
// every layer's as a call would.

// warmUp is the answers that take a key past its slow start, and past
// the answers read in full at first, after which the calls of a key that
// learned nothing go at once.
func warmUp(then ...step) []step {
	steps := make([]step, max(quotaReadFirst, learn.StartDone)+1)
	for i := range steps {
		steps[i] = answer(200)
	}
	return append(steps, then...)
}

// sendWarmUp sends the requests warmUp answers.
func sendWarmUp(t *testing.T, tr *Transport) {
	t.Helper()
	for range max(quotaReadFirst, learn.StartDone) + 1 {
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
}

// startRoundTrip sends req through tr in a goroutine of its own; the
// function it returns waits for the response.
func startRoundTrip(t *testing.T, tr *Transport, req *http.Request) func() *http.Response {
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	return func() *http.Response { return <-done }
}

// twoCaps is a transport over base with a breaker and two concurrency
// caps of one each, one per host and one for every request, neither of
// which paces.
func twoCaps(base http.RoundTripper, b BreakerPolicy) *Transport {
	return New(base, WithBreaker(b),
		WithLimit(Limit{Name: "host", Rate: rate.Inf, MaxConcurrent: 1}),
		WithLimit(Limit{Name: "all", Key: Global, Rate: rate.Inf, MaxConcurrent: 1}))
}

// A response let go at once holds a slot of each cap until its body is
// closed or read to its end, and frees each once, however often it is
// closed.
func TestAtOnceSlotsAreHeldUntilTheBodyIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(warmUp(answer(200))...)
		tr := twoCaps(s.mock(), BreakerPolicy{})
		sendWarmUp(t, tr)
		s.reset(answer(200))
		req := mustRequest(t, http.MethodGet, nil)
		first, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		second := startRoundTrip(t, tr, req)
		synctest.Wait()
		if n := s.calls(); n != 1 {
			t.Fatalf("%d requests reached the server while the first body was open, want 1", n)
		}
		_ = first.Body.Close()
		_ = first.Body.Close() // a second Close frees nothing more
		secondResp := second()
		if n := s.calls(); n != 2 {
			t.Fatalf("%d requests reached the server once the first body was closed, want 2", n)
		}
		// Two slots freed by the two Closes would let a third through
		// beside the second, whose body is still open.
		third := startRoundTrip(t, tr, req)
		synctest.Wait()
		if n := s.calls(); n != 2 {
			t.Fatalf("%d requests reached the server beside an open body, want 2", n)
		}
		if b, err := io.ReadAll(secondResp.Body); err != nil || string(b) != "OK" {
			t.Fatalf("body = %q, %v", b, err)
		}
		thirdResp := third() // read to its end, the second body freed both slots
		_ = secondResp.Body.Close()
		_ = thirdResp.Body.Close()
		s.assertAllClosed(t)
		for _, st := range tr.KeyStatus(req.URL.Host).Scopes {
			if st.InFlight != 0 {
				t.Errorf("scope %s: %d in flight after every body closed, want 0", st.Name, st.InFlight)
			}
		}
	})
}

// The breaker hears every answer of a call let go at once, read by its
// IsFailure once each: successes, a Final failure, and a retried one.
func TestAtOnceAnswersAreToldToTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(warmUp()...)
		var asked int
		tr := twoCaps(s.mock(), BreakerPolicy{IsFailure: func(resp *http.Response, err error) bool {
			asked++
			return err != nil || resp.StatusCode >= 500
		}})
		sendWarmUp(t, tr)
		s.reset(answer(200), answer(500), answer(503), answer(200))
		asked = 0
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodGet} {
			resp, err := tr.RoundTrip(mustRequest(t, method, strings.NewReader("x")))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		// GET 200; POST 500, Final; GET 503, retried, then 200.
		if asked != 4 || s.calls() != 4 {
			t.Errorf("IsFailure asked %d times of %d attempts, want once of each of 4", asked, s.calls())
		}
		st := tr.BreakerStatuses()
		if len(st) != 1 || st[0].State != BreakerClosed {
			t.Fatalf("breakers = %+v, want one, closed", st)
		}
		// The 500 and the 503 were failures; the 200 after them reset
		// the consecutive count.
		if st[0].Failures != 2 || st[0].ConsecutiveFailures != 0 {
			t.Errorf("breaker counted %d failures, %d consecutive; want 2, 0", st[0].Failures, st[0].ConsecutiveFailures)
		}
		s.assertAllClosed(t)
	})
}

// A default breaker (no IsFailure) counts a Final 5xx let go at once as a
// failure, and opens on enough of them, as it does on any call's: then
// the next call is refused.
func TestAtOnceFinalServerErrorsTripTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(warmUp()...)
		tr := twoCaps(s.mock(), BreakerPolicy{ConsecutiveFailures: 3, Cooldown: time.Minute, FailFast: true})
		sendWarmUp(t, tr)
		s.reset(answer(500))
		for range 3 {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodPost, strings.NewReader("x")))
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
		}
		_, err := tr.RoundTrip(mustRequest(t, http.MethodPost, strings.NewReader("x")))
		if _, open := err.(*CircuitOpenError); !open || s.calls() != 3 {
			t.Errorf("4th call: err = %v after %d attempts, want a *CircuitOpenError after 3", err, s.calls())
		}
		s.assertAllClosed(t)
	})
}
