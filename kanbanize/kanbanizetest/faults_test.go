package kanbanizetest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"testing"
	"testing/synctest"
	"time"
)

func TestCommentsScript(t *testing.T) {
	s := New(Config{RetryAfter: RetryAfterSeconds, Scripts: map[Endpoint][]Fault{EndpointComments: {Fault429, Fault503, FaultNone}}})
	// Requests to other endpoints do not move the comments script on.
	if r := get(t, s, "/cards/101"); r.status != 200 {
		t.Fatalf("GET /cards/101 = %d, want 200", r.status)
	}
	tests := []struct {
		path       string
		wantStatus int
	}{
		{path: "/cards/101/comments", wantStatus: 429},
		{path: "/cards/102/comments", wantStatus: 503},
		{path: "/cards/103/comments", wantStatus: 200},
		{path: "/cards/101/comments", wantStatus: 200},
	}
	var rs []result
	for i, tt := range tests {
		r := get(t, s, tt.path)
		if r.status != tt.wantStatus {
			t.Fatalf("request %d, GET %s = %d %s, want %d", i+1, tt.path, r.status, r.body, tt.wantStatus)
		}
		rs = append(rs, r)
	}
	if e := errorOf(t, rs[0]); e.Error.Code != "RL01" || rs[0].header.Get("Retry-After") != "1" {
		t.Errorf("scripted 429 = %s with Retry-After %q, want RL01 with Retry-After 1", rs[0].body, rs[0].header.Get("Retry-After"))
	}
	if rs[1].body != "" || len(rs[1].header) != 0 {
		t.Errorf("scripted 503 = %q with headers %v, want an empty body and no headers", rs[1].body, rs[1].header)
	}
	want := Stats{
		Requests:   5,
		ByEndpoint: map[Endpoint]int{EndpointCard: 1, EndpointComments: 4, EndpointSubtasks: 0, EndpointAPILimits: 0},
		Limited:    1,
		Faults:     1,
	}
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestEachFault(t *testing.T) {
	tests := []struct {
		give       Fault
		wantStatus int
		wantCode   string // of the error body; "" for none
		wantJSON   bool
	}{
		{give: FaultNone, wantStatus: 200, wantJSON: true},
		{give: Fault429, wantStatus: 429, wantCode: "RL01"},
		{give: FaultRL02, wantStatus: 400, wantCode: "RL02"},
		{give: Fault503, wantStatus: 503},
		{give: FaultMalformedJSON, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			s := New(Config{Scripts: map[Endpoint][]Fault{EndpointSubtasks: {tt.give}}})
			r := get(t, s, "/cards/102/subtasks")
			if r.status != tt.wantStatus {
				t.Fatalf("GET = %d %s, want %d", r.status, r.body, tt.wantStatus)
			}
			if tt.wantCode != "" {
				if got := errorOf(t, r).Error.Code; got != tt.wantCode {
					t.Errorf("code = %q, want %q", got, tt.wantCode)
				}
				return
			}
			var v any
			if err := json.Unmarshal([]byte(r.body), &v); (err == nil) != tt.wantJSON {
				t.Errorf("json.Unmarshal(%q) = %v, want valid JSON: %v", r.body, err, tt.wantJSON)
			}
		})
	}
}

func TestScriptedFaultsSkipTheLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{PerMinute: 1, Scripts: map[Endpoint][]Fault{EndpointCard: {Fault429, Fault503, FaultNone}}})
		var got []int
		for range 4 {
			got = append(got, get(t, s, "/cards/100").status)
		}
		// Only the third takes the one token.
		if want := []int{429, 503, 200, 429}; !reflect.DeepEqual(got, want) {
			t.Errorf("statuses = %v, want %v", got, want)
		}
	})
}

func TestScriptCountsOnlyAuthorizedRequests(t *testing.T) {
	s := New(Config{Scripts: map[Endpoint][]Fault{EndpointCard: {Fault503}}})
	if r := do(t, s.Transport(), http.MethodGet, api+"/cards/100", "wrong"); r.status != 401 {
		t.Fatalf("GET with a wrong key = %d, want 401", r.status)
	}
	if r := get(t, s, "/cards/100"); r.status != 503 {
		t.Errorf("first GET with the key = %d, want the scripted 503", r.status)
	}
}

func TestFaultResetInProcess(t *testing.T) {
	s := New(Config{Scripts: map[Endpoint][]Fault{EndpointCard: {FaultReset}}})
	req, err := http.NewRequest(http.MethodGet, api+"/cards/100", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("apikey", DefaultAPIKey)
	resp, err := s.Transport().RoundTrip(req)
	if resp != nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("RoundTrip = %v, %v, want no response and io.ErrUnexpectedEOF", resp, err)
	}
	if r := get(t, s, "/cards/100"); r.status != 200 {
		t.Errorf("GET after the script = %d, want 200", r.status)
	}
	if got := s.Stats().Faults; got != 1 {
		t.Errorf("Stats().Faults = %d, want 1", got)
	}
}

// closeTracker records whether a request body was closed.
type closeTracker struct {
	io.Reader
	closed bool
}

func (c *closeTracker) Close() error { c.closed = true; return nil }

func TestTransportResponse(t *testing.T) {
	s := New(Config{})
	body := &closeTracker{Reader: http.NoBody}
	req, err := http.NewRequest(http.MethodGet, api+"/cards/100", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("apikey", DefaultAPIKey)
	resp, err := s.Transport().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.Status != "200 OK" || resp.StatusCode != 200 || resp.Request != req || resp.ContentLength != int64(len(b)) || resp.ProtoMajor != 1 {
		t.Errorf("RoundTrip = %+v, want 200 OK, HTTP/1.1, ContentLength %d and the request", resp, len(b))
	}
	if !body.closed {
		t.Errorf("RoundTrip left the request body open, want it closed")
	}
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := New(Config{Latency: 10 * time.Second})
		start := time.Now()
		if r := get(t, s, "/cards/100"); r.status != 200 {
			t.Fatalf("GET = %d, want 200", r.status)
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("GET took %v, want 10s", got)
		}
	})
}

func TestLatencyHonoursTheContext(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		wantErr error
	}{
		{
			name: "canceled",
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(time.Second, cancel)
				return ctx, cancel
			},
			wantErr: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), time.Second)
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := New(Config{Latency: 10 * time.Second})
				ctx, cancel := tt.ctx()
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/cards/100", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("apikey", DefaultAPIKey)
				start := time.Now()
				resp, err := s.Transport().RoundTrip(req)
				if resp != nil || !errors.Is(err, tt.wantErr) {
					t.Fatalf("RoundTrip = %v, %v, want no response and %v", resp, err, tt.wantErr)
				}
				if got := time.Since(start); got != time.Second {
					t.Errorf("RoundTrip returned after %v, want 1s", got)
				}
			})
		})
	}
}
