package ratewise

import (
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests request and response bodies: replayed byte for byte,
// sent once when they cannot be, discarded ones drained (bounded) and
// closed.

func TestBodyReplayedOnEveryAttempt(t *testing.T) {
	payload := strings.Repeat("ratewise-", 1000)
	tests := []struct {
		name   string
		body   func() io.Reader
		length int64 // ContentLength to set, when not 0
	}{
		{name: "GetBody", body: func() io.Reader { return strings.NewReader(payload) }},
		// No GetBody, but a known length: buffered.
		{name: "buffered", body: func() io.Reader { return io.MultiReader(strings.NewReader(payload)) }, length: int64(len(payload))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, "Retry-After", "1"), answer(503, "Retry-After", "1"), answer(201))
				req := mustRequest(t, http.MethodPost, tt.body())
				req.Header.Set("Content-Type", "text/plain")
				if tt.length != 0 {
					req.ContentLength = tt.length
				}
				before := snapshot(req)

				resp, err := New(s.mock()).RoundTrip(req)
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readAll(t, resp)
				if resp.StatusCode != 201 {
					t.Fatalf("status = %d, want 201", resp.StatusCode)
				}
				if len(s.bodies) != 3 {
					t.Fatalf("server got %d requests, want 3", len(s.bodies))
				}
				for i, got := range s.bodies {
					if string(got) != payload {
						t.Errorf("attempt %d body: %d bytes, want the %d bytes sent", i+1, len(got), len(payload))
					}
				}
				if after := snapshot(req); !reflect.DeepEqual(before, after) {
					t.Errorf("request changed:\nbefore %+v\nafter  %+v", before, after)
				}
			})
		})
	}
}

// requestView is what the caller sees of a request, to check RoundTrip
// leaves it alone.
type requestView struct {
	Method, URL   string
	Header        http.Header
	ContentLength int64
	Body          io.ReadCloser
	HasGetBody    bool
}

func snapshot(req *http.Request) requestView {
	return requestView{req.Method, req.URL.String(), req.Header.Clone(), req.ContentLength, req.Body, req.GetBody != nil}
}

func TestBodyNotBufferedGetsOneAttempt(t *testing.T) {
	payload := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		length int64
	}{
		{name: "longer than MaxBufferedBody", length: int64(len(payload))},
		{name: "unknown length", length: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScript(answer(429, "Retry-After", "1"), answer(200))
				body := &closeRecorder{Reader: strings.NewReader(payload)}
				req := mustRequest(t, http.MethodPost, body)
				req.ContentLength = tt.length
				resp, err := New(s.mock(), WithRetry(RetryPolicy{MaxBufferedBody: 10})).RoundTrip(req)
				if err != nil {
					t.Fatalf("RoundTrip: %v", err)
				}
				readAll(t, resp)
				if resp.StatusCode != 429 || s.calls() != 1 {
					t.Errorf("status %d after %d calls, want the 429 after 1", resp.StatusCode, s.calls())
				}
				if string(s.bodies[0]) != payload {
					t.Errorf("server got %q, want the whole body", s.bodies[0])
				}
			})
		})
	}
}

func TestStreamingBodyIsNotReadAhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A body that yields its data only after a while: the transport
		// must hand it to the base at once instead of reading it first.
		pr, pw := io.Pipe()
		go func() {
			time.Sleep(time.Minute)
			_, _ = pw.Write([]byte("late"))
			_ = pw.Close()
		}()
		var sentAt time.Duration
		start := time.Now()
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			sentAt = time.Since(start)
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		if _, err := New(base).RoundTrip(mustRequest(t, http.MethodPost, pr)); err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if sentAt != 0 {
			t.Errorf("request reached the base after %v, want at once", sentAt)
		}
	})
}

func TestDiscardedBodiesAreClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429), answer(429, "Retry-After", "2"), answer(503, "Retry-After", "1"), answer(429), answer(200))
		resp, err := New(s.mock()).RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if opened, closed := s.closed(); opened != 5 || closed != 4 {
			t.Errorf("before the caller closes: %d opened, %d closed; want 5, 4", opened, closed)
		}
		if body := readAll(t, resp); body != "OK" {
			t.Errorf("final body = %q, want OK", body)
		}
		s.assertAllClosed(t)
	})
}

func TestGetBodyFailureKeepsResponseAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		req := mustRequest(t, http.MethodPost, strings.NewReader("payload"))
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
		ctx := WithBudget(context.Background(), time.Minute)
		resp, err := New(s.mock()).RoundTrip(req.WithContext(ctx))
		if err != nil {
			t.Fatalf("RoundTrip: %v", err)
		}
		if body := readAll(t, resp); resp.StatusCode != 429 || body != http.StatusText(http.StatusTooManyRequests) {
			t.Errorf("got %d %q, want the 429 with its body", resp.StatusCode, body)
		}
		if left, _ := BudgetLeft(ctx); left != time.Minute {
			t.Errorf("budget left = %v, want all of it, 1m", left)
		}
	})
}

// endlessBody is a response body that never ends; it counts what was read.
type endlessBody struct {
	read   int64
	closed bool
}

func (b *endlessBody) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	b.read += int64(len(p))
	return len(p), nil
}

func (b *endlessBody) Close() error { b.closed = true; return nil }

func TestDiscardedBodyDrainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		endless := &endlessBody{}
		calls := 0
		base := roundTripFunc(func(*http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: endless}, nil
			}
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		})
		resp, err := New(base).RoundTrip(mustRequest(t, http.MethodGet, nil))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("RoundTrip = %v, %v; want the 200", resp, err)
		}
		if !endless.closed || endless.read > maxDrain+32<<10 {
			t.Errorf("discarded endless body: closed %v after reading %d bytes; want closed after at most about %d",
				endless.closed, endless.read, maxDrain)
		}
	})
}
