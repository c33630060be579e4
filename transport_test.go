package ratewise

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func TestMaxAttemptsReturnsLastResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		ctx, stats := WithCallStats(context.Background())
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if resp.StatusCode != 429 || s.calls() != DefaultMaxAttempts || stats.Attempts() != DefaultMaxAttempts {
			t.Errorf("status %d, server calls %d, attempts %d; want 429, %d, %d",
				resp.StatusCode, s.calls(), stats.Attempts(), DefaultMaxAttempts, DefaultMaxAttempts)
		}
		var rle *RateLimitError
		if err := CheckResponse(resp); !errors.As(err, &rle) || rle.Attempts != DefaultMaxAttempts || rle.RetryAfter != time.Second {
			t.Errorf("CheckResponse = %v, want a RateLimitError with %d attempts and RetryAfter 1s", err, DefaultMaxAttempts)
		}
		if body := readAll(t, resp); body != http.StatusText(http.StatusTooManyRequests) {
			t.Errorf("body = %q after CheckResponse, want it intact", body)
		}
	})
}

func TestFinalResponsesAreNotRetried(t *testing.T) {
	for _, status := range []int{200, 204, 301, 400, 401, 403, 404, 501, 505} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(status), answer(200))
				if r := s.get(t, context.Background(), RetryPolicy{}); r.status != status || s.calls() != 1 {
					t.Errorf("status %d after %d calls, want %d after 1", r.status, s.calls(), status)
				}
			})
		})
	}
}

func TestClassifyHookAndPhrases(t *testing.T) {
	bigBody := "Please confirm you're NOT A BOT. " + strings.Repeat("padding ", 2000)
	tests := []struct {
		name   string
		policy RetryPolicy
		first  step
		want   int // server calls
	}{
		{name: "hook retries 502", policy: RetryPolicy{Classify: func(r *http.Response) Class {
			if r.StatusCode == http.StatusBadGateway {
				return Retryable
			}
			return DefaultClassify(r)
		}}, first: answer(502), want: 2},
		{name: "hook keeps 429 final", policy: RetryPolicy{Classify: func(*http.Response) Class { return Final }},
			first: answer(429), want: 1},
		{name: "phrase in 403 body", policy: RetryPolicy{RateLimitPhrases: []string{"confirm you're not a bot"}},
			first: step{status: 403, body: bigBody}, want: 2},
		{name: "phrase past 4 KiB ignored", policy: RetryPolicy{RateLimitPhrases: []string{"needle"}},
			first: step{status: 403, body: strings.Repeat("x", 5000) + "needle"}, want: 1},
		{name: "phrase in 200 ignored", policy: RetryPolicy{RateLimitPhrases: []string{"rate limit"}},
			first: step{status: 200, body: "rate limit docs"}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(tt.first, step{status: 200, body: "done"})
				r := s.get(t, context.Background(), tt.policy)
				if s.calls() != tt.want {
					t.Errorf("server calls = %d, want %d", s.calls(), tt.want)
				}
				if tt.want == 1 && r.body != tt.first.body {
					t.Errorf("final body has %d bytes, want all %d of the server's", len(r.body), len(tt.first.body))
				}
			})
		})
	}
}

func TestInvalidPolicyFailsEveryRoundTrip(t *testing.T) {
	s := newScript(answer(200))
	tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: -1, Multiplier: 0.5}))
	body := &closeRecorder{Reader: strings.NewReader("x")}
	req := mustRequest(t, http.MethodPost, body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || err == nil {
		t.Fatalf("RoundTrip = %v, %v; want an error", resp, err)
	}
	for _, want := range []string{"MaxAttempts (-1)", "Multiplier (0.5)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if !body.closed || s.calls() != 0 {
		t.Errorf("body closed %v, server calls %d; want true, 0", body.closed, s.calls())
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestBrokenBaseReturningNothing(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, nil })
	resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil))
	if resp != nil || !errors.Is(err, errNoResponse) || calls != 1 {
		t.Errorf("RoundTrip = %v, %v after %d calls; want nil, errNoResponse after 1", resp, err, calls)
	}
}

func TestBrokenBaseReturningResponseAndError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, _ := s.respond(r)
			return resp, errReset
		})
		// With no budget the retry is refused: the call must still end with
		// the error, not the response the base closed.
		ctx := WithBudget(context.Background(), 0)
		resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
		if resp != nil || !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("RoundTrip = %v, %v; want nil and the error", resp, err)
		}
		s.assertAllClosed(t)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type idleCloser struct {
	http.RoundTripper
	closes int
}

func (c *idleCloser) CloseIdleConnections() { c.closes++ }

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &idleCloser{}
	New(base).CloseIdleConnections()
	if base.closes != 1 {
		t.Errorf("base CloseIdleConnections called %d times, want 1", base.closes)
	}
	New(roundTripFunc(nil)).CloseIdleConnections() // a base without the method: no panic
}

func TestNewNilBaseUsesDefaultTransport(t *testing.T) {
	if tr := New(nil); tr.base != http.DefaultTransport {
		t.Errorf("base = %T, want http.DefaultTransport", tr.base)
	}
}

func TestWorksInsideHTTPClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "3"), step{status: 200, body: "hello"})
		client := &http.Client{Transport: New(s.mock())}
		resp, err := client.Get(testURL)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if body := readAll(t, resp); body != "hello" {
			t.Errorf("body = %q, want hello", body)
		}
	})
}

func TestRequestWithoutURLFailsAtOnce(t *testing.T) {
	calls := 0
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { calls++; return nil, errors.New("no URL") })
	_, err := New(base).RoundTrip(&http.Request{Method: http.MethodGet, Header: http.Header{}})
	if err == nil || calls != 0 {
		t.Errorf("RoundTrip = %v after %d base calls, want an error and none", err, calls)
	}
}

func TestCancelDuringRetryAdmissionEndsWithTheContextsError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(200))
		// The retry waits a minute for a token; the context ends first.
		tr := New(s.mock(), WithLimit(Limit{Rate: rate.Every(time.Minute), Burst: 1}), WithRetry(RetryPolicy{MaxAttempts: 3}))
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, testURL, nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip = %v, %v; want nil and context.Canceled, not the kept 429", resp, err)
		}
		s.assertAllClosed(t)
	})
}

// TestDeadlineDuringAnAttemptClosesItsResponse: a call whose deadline
// passes while an attempt is out closes the response that attempt gets.
func TestDeadlineDuringAnAttemptClosesItsResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"))
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			time.Sleep(2 * time.Second)
			return s.respond(r)
		})
		tr := New(base)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v", err)
		}
		s.assertAllClosed(t)
	})
}

// A call with nothing in its context through New(base) sends its first
// attempt with none of the layers' bookkeeping (sendAtOnce); what it
// answers must still be read once, counted, and retried as any call's.
func TestCallsSentAtOnceAreClassifiedOnceAndCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200), answer(503, "Retry-After", "1"), answer(429), answer(200))
		var classified int
		tr := New(s.mock(), WithRetry(RetryPolicy{Classify: func(r *http.Response) Class {
			classified++
			return DefaultClassify(r)
		}}))
		for range 2 {
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("RoundTrip = %v, %v; want a 200", resp, err)
			}
			readAll(t, resp)
		}
		if classified != 4 || s.calls() != 4 {
			t.Errorf("Classify called %d times over %d attempts, want once for each of 4", classified, s.calls())
		}
		st := tr.Stats()
		if st.Calls != 2 || st.Attempts != 4 || st.Retries != 2 || st.Succeeded != 2 || st.RateLimitHits != 2 {
			t.Errorf("Stats = %d calls, %d attempts, %d retries, %d succeeded, %d rate-limit hits; want 2, 4, 2, 2, 2",
				st.Calls, st.Attempts, st.Retries, st.Succeeded, st.RateLimitHits)
		}
	})
}
