package ratewisetest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// roundTrip sends one GET through rt and returns its status, header and
// body.
func roundTrip(t *testing.T, rt http.RoundTripper, ctx context.Context) (int, http.Header, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.Request != req {
		t.Error("response does not carry its request")
	}
	return resp.StatusCode, resp.Header, string(body), nil
}

func TestBucketInProcessLimitsAndRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{Rate: 2, Burst: 2, PublishHeaders: true, IETFHeaders: true})
		var statuses []int
		for range 3 {
			status, _, _, err := roundTrip(t, b, context.Background())
			if err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, status)
		}
		if want := []int{200, 200, 429}; !slices.Equal(statuses, want) {
			t.Fatalf("statuses = %v, want %v", statuses, want)
		}
		time.Sleep(500 * time.Millisecond) // one token's worth
		status, h, body, err := roundTrip(t, b, context.Background())
		if err != nil || status != 200 || body != "ok" {
			t.Fatalf("after a refill: %d %q %v, want 200 ok", status, body, err)
		}
		if h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Limit") != "2" || h.Get("RateLimit") != `"default";r=0;t=1` {
			t.Errorf("headers = %v, want the bucket's count", h)
		}
		if got, want := b.Stats(), (Stats{Received: 4, Admitted: 3, Limited: 1}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
		if n := len(b.Arrivals()); n != 4 {
			t.Errorf("%d arrivals, want 4", n)
		}
	})
}

func TestBucketInProcessLatencyAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{Latency: time.Second})
		start := time.Now()
		if _, _, _, err := roundTrip(t, b, context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second {
			t.Errorf("answer took %v, want the 1s latency", took)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, _, _, err := roundTrip(t, b, ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled during the latency: err = %v, want the context's", err)
		}
	})
}

func TestBucketInProcessFaults(t *testing.T) {
	b := NewBucket(Config{FaultRate: 1, Faults: []Fault{FaultReset}})
	if _, _, _, err := roundTrip(t, b, context.Background()); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("FaultReset: err = %v, want a connection reset", err)
	}
	b = NewBucket(Config{FaultRate: 1, Faults: []Fault{Fault503}})
	if status, _, _, err := roundTrip(t, b, context.Background()); err != nil || status != 503 {
		t.Errorf("Fault503: %d, %v; want 503", status, err)
	}
}

func TestBucketInProcessHandlerGetsItsOwnRequest(t *testing.T) {
	var sawBody bool
	b := NewBucket(Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body) // a GET without a body, as a server sees it
		sawBody = err == nil
		r.Header.Set("X-Handler", "changed")
		_, _ = io.WriteString(w, "done")
	})})
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
	resp, err := b.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !sawBody || req.Header.Get("X-Handler") != "" {
		t.Errorf("handler read a body: %v; caller's request changed: %v", sawBody, req.Header)
	}
}
