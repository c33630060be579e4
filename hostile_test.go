package ratewise

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
)

// This file pins what the transport does with servers that are broken or
// hostile: absurd or malformed hints, bodies without end, answers that
// never change, redirects in a circle.

// hostilePolicy retries after exactly 100ms when no hint says otherwise.
var hostilePolicy = RetryPolicy{
	MaxAttempts:  3,
	InitialDelay: 100 * time.Millisecond,
	MaxDelay:     100 * time.Millisecond,
	Jitter:       JitterNone,
	TotalWaitCap: 30 * time.Second,
}

func TestHostileWaitHints(t *testing.T) {
	const backoff = 100 * time.Millisecond
	tests := []struct {
		name   string
		header []string // key, value pairs of the 429
		// retryAt is when the second attempt is sent; zero means there is
		// none: the call ends at once with the 429.
		retryAt time.Duration
	}{
		{name: "beyond any duration", header: []string{"Retry-After", "99999999999"}, retryAt: backoff},
		{name: "year 9999", header: []string{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}, retryAt: backoff},
		{name: "centuries, still a duration", header: []string{"Retry-After", "9000000000"}},
		{name: "negative", header: []string{"Retry-After", "-5"}, retryAt: backoff},
		{name: "fractional", header: []string{"Retry-After", "1.5"}, retryAt: 1500 * time.Millisecond},
		{name: "below a nanosecond", header: []string{"Retry-After", "0.0000000001"}, retryAt: backoff},
		{name: "exponent", header: []string{"Retry-After", "1e3"}, retryAt: backoff},
		{name: "NUL byte", header: []string{"Retry-After", "3\x00"}, retryAt: backoff},
		{name: "escape sequence", header: []string{"Retry-After", "\x1b[31m3"}, retryAt: backoff},
		{name: "line break inside", header: []string{"Retry-After", "3\r\nX-Evil: 1"}, retryAt: backoff},
		{name: "invalid then valid", header: []string{"Retry-After", "soon", "Retry-After", "3"}, retryAt: 3 * time.Second},
		{name: "two valid: the first wins", header: []string{"Retry-After", "3", "Retry-After", "10"}, retryAt: 3 * time.Second},
		{
			name:    "Retry-After wins over a reset",
			header:  []string{"Retry-After", "2", "X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "0"},
			retryAt: 2 * time.Second,
		},
		{
			name:    "a reset with quota left is not a hint",
			header:  []string{"X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "5"},
			retryAt: backoff,
		},
		{
			name:    "a reset as a Unix time past 2262",
			header:  []string{"X-RateLimit-Reset", "99999999999999"},
			retryAt: backoff,
		},
		// The other forms a hint takes: milliseconds, seconds from now,
		// Go durations and RFC 3339 date-times.
		{name: "milliseconds, negative", header: []string{"Retry-After-Ms", "-5"}, retryAt: backoff},
		{name: "milliseconds, fractional", header: []string{"Retry-After-Ms", "1500.5"}, retryAt: 1500500 * time.Microsecond},
		{name: "milliseconds beyond any duration", header: []string{"X-Ms-Retry-After-Ms", "99999999999999999999"}, retryAt: backoff},
		{name: "milliseconds with an exponent", header: []string{"X-Ms-Retry-After-Ms", "1e3"}, retryAt: backoff},
		// (No remaining count beside it: a count of 0 paces the key on
		// its own.)
		{name: "seconds from now, negative", header: []string{"X-RateLimit-Reset-After", "-64.57"}, retryAt: backoff},
		{
			name:    "a Go duration, negative",
			header:  []string{"X-RateLimit-Remaining-Tokens", "0", "X-RateLimit-Reset-Tokens", "-6m0s"},
			retryAt: backoff,
		},
		{
			name:    "a Go duration beyond any duration",
			header:  []string{"X-RateLimit-Remaining-Tokens", "0", "X-RateLimit-Reset-Tokens", "9999999999999h"},
			retryAt: backoff,
		},
		{
			name:   "a Go duration of centuries",
			header: []string{"X-RateLimit-Remaining-Tokens", "0", "X-RateLimit-Reset-Tokens", "2000000h"},
		},
		{
			name:    "a date in the year 9999",
			header:  []string{"Anthropic-RateLimit-Tokens-Remaining", "0", "Anthropic-RateLimit-Tokens-Reset", "9999-12-31T23:59:59Z"},
			retryAt: backoff,
		},
		{
			name:    "a date that is no date",
			header:  []string{"Anthropic-RateLimit-Tokens-Remaining", "0", "Anthropic-RateLimit-Tokens-Reset", "2026-13-45T25:61Z"},
			retryAt: backoff,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, tt.header...), answer(200))
				start := time.Now()
				r := s.get(t, context.Background(), hostilePolicy)
				got := s.offsets(start)
				switch {
				case tt.retryAt == 0 && (r.status != 429 || len(got) != 1 || r.elapsed != 0):
					t.Errorf("got %d after %v, requests at %v; want the 429 at once, nothing sent again", r.status, r.elapsed, got)
				case tt.retryAt != 0 && (r.status != 200 || len(got) != 2 || got[1] != tt.retryAt):
					t.Errorf("got %d, requests at %v; want a 200 with the retry at %v", r.status, got, tt.retryAt)
				}
				s.assertAllClosed(t)
			})
		})
	}
}

// TestHostileGigabyteRateLimitBody: a 429 announcing a 1 GB body is read
// only as far as the caps: 4 KiB to look for phrases and keep, 64 KiB to
// drain before a retry.
func TestHostileGigabyteRateLimitBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bodies []*endlessBody
		mt := httpmock.NewMockTransport()
		mt.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
			b := &endlessBody{}
			bodies = append(bodies, b)
			return &http.Response{
				StatusCode: 429, Status: "429 Too Many Requests", Request: req,
				Header:        http.Header{"Retry-After": {"1"}, "Content-Type": {"text/plain"}},
				ContentLength: 1 << 30, Body: b,
			}, nil
		})
		tr := New(mt, WithRetry(hostilePolicy))
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 429 || len(bodies) != 3 {
			t.Fatalf("got %d after %d attempts, want the third 429", resp.StatusCode, len(bodies))
		}
		// Two discarded bodies, drained to the cap and closed; the last is
		// the caller's, still open and readable.
		const bound = 2*(maxDrain+peekLimit) + peekLimit
		if got := bodies[0].read + bodies[1].read + bodies[2].read; got > bound {
			t.Errorf("read %d bytes of 1 GB bodies, want at most %d", got, bound)
		}
		if !bodies[0].closed || !bodies[1].closed || bodies[2].closed {
			t.Errorf("closed: %v %v %v, want the discarded two only", bodies[0].closed, bodies[1].closed, bodies[2].closed)
		}
		if n, err := io.CopyN(io.Discard, resp.Body, 1<<20); n != 1<<20 || err != nil {
			t.Errorf("the caller read %d bytes of the last body, %v; want the whole MiB asked for", n, err)
		}
		resp.Body.Close()
	})
}

// TestHostileGigabyteBodyNotKeptWhenRefused: when the attempt after a 429
// is refused (here by the breaker the 429 opened), the 429 is handed back
// only if its body fits the 4 KiB kept in memory; a larger one is not
// buffered, and the caller gets the breaker's error.
func TestHostileGigabyteBodyNotKeptWhenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := &endlessBody{}
		mt := httpmock.NewMockTransport()
		mt.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 429, Request: req, Header: http.Header{"Retry-After": {"1"}}, ContentLength: -1, Body: body}, nil
		})
		tr := New(mt, WithRetry(hostilePolicy), WithBreaker(BreakerPolicy{ConsecutiveFailures: 1, Cooldown: time.Hour}))
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		var open *CircuitOpenError
		if resp != nil || !errors.As(err, &open) {
			t.Fatalf("got %v, %v; want the breaker's error", resp, err)
		}
		if got := body.read; got > maxDrain+peekLimit+1 {
			t.Errorf("read %d bytes, want at most %d", got, maxDrain+peekLimit+1)
		}
		if !body.closed {
			t.Error("the discarded body was not closed")
		}
	})
}

// TestHostileRateLimitedForever: a server that answers 429 to everything
// gets MaxAttempts requests within the budget, and the caller its last
// 429, never a hang.
func TestHostileRateLimitedForever(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "2"))
		p := hostilePolicy
		p.MaxAttempts = 1000
		p.TotalWaitCap = 15 * time.Second
		r := s.get(t, context.Background(), p)
		// Waits of 2s each: seven fit in 15s, the eighth does not.
		if r.status != 429 || s.calls() != 8 || r.elapsed != 14*time.Second || r.stats.Waited() > p.TotalWaitCap {
			t.Errorf("got %d after %d requests, %v elapsed, %v waited; want the 429 after 8 requests and 14s",
				r.status, s.calls(), r.elapsed, r.stats.Waited())
		}
		s.assertAllClosed(t)
	})
}

// TestHostileRedirectLoop: redirects are the http.Client's to follow; each
// hop is one call of the transport, not retried, and every body closes.
func TestHostileRedirectLoop(t *testing.T) {
	s := newScript(answer(http.StatusFound, "Location", testURL))
	client := &http.Client{Transport: New(s.mock(), WithRetry(hostilePolicy))}
	resp, err := client.Get(testURL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("a redirect loop ended without an error")
	}
	if !strings.Contains(err.Error(), "stopped after 10 redirects") || s.calls() != 10 {
		t.Errorf("got %v after %d requests, want http.Client's redirect limit after 10", err, s.calls())
	}
	s.assertAllClosed(t)
}

// TestHostileEndlessOKBody: a 200 whose body never ends comes back at
// once; the caller's cancellation ends its read, and closing it frees the
// concurrency slot it holds.
func TestHostileEndlessOKBody(t *testing.T) {
	release := make(chan struct{})
	var handlers sync.WaitGroup
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers.Add(1)
		defer handlers.Done()
		w.WriteHeader(200)
		_, _ = io.WriteString(w, "the start of a body that never ends")
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer func() {
		close(release)
		_ = srv.Close()
		handlers.Wait()
	}()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr := New(base, WithLimit(Limit{MaxConcurrent: 1, FailFast: true}))

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.Addr().String()+"/stream", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "the start " {
		t.Fatalf("read %q, %v", buf, err)
	}
	// While the body is open, its slot is taken.
	req2, _ := http.NewRequest(http.MethodGet, req.URL.String(), nil)
	var limited *ClientLimitError
	if _, err := tr.RoundTrip(req2); !errors.As(err, &limited) {
		t.Errorf("a second call while the body is open: %v, want a *ClientLimitError", err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, resp.Body); !errors.Is(err, context.Canceled) {
		t.Errorf("reading after cancel ended with %v, want context.Canceled", err)
	}
	resp.Body.Close()
	// The slot is free again: the next call is sent (and given a body that
	// ends, once released).
	resp2, err := tr.RoundTrip(req2)
	if err != nil {
		t.Fatalf("a call after the body closed: %v", err)
	}
	resp2.Body.Close()
}

// TestHostileControlCharactersStayOutOfText: escape sequences and NUL
// bytes a server puts in headers and bodies reach no log line and no
// error text, where they could forge lines or repaint a terminal.
func TestHostileControlCharactersStayOutOfText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		evil := step{status: 429, header: http.Header{"Retry-After": {"\x1b[31m3"}, "X-Reason": {"\x00\x1b[2J"}}, body: "\x1b[2Jslow down\x00\nlevel=ERROR msg=forged"}
		s := newScript(evil)
		var logs lockedLog
		tr := New(s.mock(), WithRetry(hostilePolicy), WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatal(err)
		}
		rlErr := CheckResponse(resp)
		resp.Body.Close()
		if rlErr == nil {
			t.Fatal("the final 429 is not a rate-limit error")
		}
		texts := map[string]string{"logs": logs.String(), "error": rlErr.Error(), "stats": tr.Stats().LastError}
		if texts["logs"] == "" {
			t.Fatal("nothing was logged")
		}
		for name, text := range texts {
			if strings.ContainsAny(text, "\x1b\x00") || strings.Contains(text, "\nlevel=ERROR msg=forged") {
				t.Errorf("%s carry the server's control characters: %q", name, text)
			}
		}
		s.assertAllClosed(t)
	})
}

// lockedLog collects log output.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHostileHintPausesTheKeyAtMostMaxPause: a hint of centuries ends the
// call that got it, and holds the key's other requests for MaxPause only.
func TestHostileHintPausesTheKeyAtMostMaxPause(t *testing.T) {
	for _, tt := range []struct {
		policy PausePolicy
		want   time.Duration
	}{
		{policy: PausePolicy{}, want: DefaultMaxPause},
		{policy: PausePolicy{MaxPause: 5 * time.Minute}, want: 5 * time.Minute},
	} {
		synctest.Test(t, func(t *testing.T) {
			s := newScript(answer(429, "Retry-After", "9000000000"), answer(200))
			tr := New(s.mock(), WithRetry(hostilePolicy), WithPause(tt.policy))
			start := time.Now()
			resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil))
			if err != nil || resp.StatusCode != 429 {
				t.Fatalf("got %v, %v; want the 429 at once", resp, err)
			}
			resp.Body.Close()
			if blocked, d := tr.Blocking(host); !blocked || d != tt.want {
				t.Errorf("MaxPause %v: the key is blocked %v for %v, want %v", tt.policy.MaxPause, blocked, d, tt.want)
			}
			// The next call waits the pause out (its budget allows an
			// hour here) and goes.
			ctx := WithBudget(context.Background(), 2*time.Hour)
			resp, err = tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("after the pause: %v, %v; want the 200", resp, err)
			}
			resp.Body.Close()
			if got := time.Since(start); got < tt.want || got > tt.want+DefaultPauseSpread {
				t.Errorf("the next request went at %v, want within the spread after %v", got, tt.want)
			}
		})
	}
	if _, err := New(nil, WithPause(PausePolicy{MaxPause: -time.Second})).RoundTrip(mustRequest(t, http.MethodGet, nil)); err == nil || !strings.Contains(err.Error(), "MaxPause") {
		t.Errorf("a negative MaxPause: %v, want an error naming it", err)
	}
}
