package ratewise

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestCheckResponse(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		header    http.Header
		wantErr   bool
		wantAfter time.Duration
		wantMsg   string
	}{
		{name: "200", status: 200},
		{name: "404", status: 404},
		{name: "503 without hint", status: 503},
		{name: "429 without hint", status: 429, wantErr: true, wantMsg: "ratewise: rate limited (429 Too Many Requests)"},
		{name: "429 with hint", status: 429, header: http.Header{"Retry-After": {"30"}}, wantErr: true, wantAfter: 30 * time.Second,
			wantMsg: "ratewise: rate limited (429 Too Many Requests); server asked to wait 30s"},
		{name: "503 with hint", status: 503, header: http.Header{"Retry-After": {"2"}}, wantErr: true, wantAfter: 2 * time.Second},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: tt.header, Body: io.NopCloser(strings.NewReader("slow down"))}
		err := CheckResponse(resp)
		if !tt.wantErr {
			if err != nil {
				t.Errorf("%s: CheckResponse = %v, want nil", tt.name, err)
			}
			continue
		}
		var rle *RateLimitError
		if !errors.As(err, &rle) || !errors.Is(err, ErrRateLimited) {
			t.Fatalf("%s: CheckResponse = %v, want a *RateLimitError matching ErrRateLimited", tt.name, err)
		}
		if rle.StatusCode != tt.status || rle.RetryAfter != tt.wantAfter || rle.HasRetryAfter != (tt.wantAfter > 0) || rle.RawBody != "slow down" {
			t.Errorf("%s: RateLimitError = %+v", tt.name, rle)
		}
		if tt.wantMsg != "" && err.Error() != tt.wantMsg {
			t.Errorf("%s: Error() = %q, want %q", tt.name, err, tt.wantMsg)
		}
	}
	if err := CheckResponse(nil); err != nil {
		t.Errorf("CheckResponse(nil) = %v, want nil", err)
	}
}

func TestRateLimitErrorRawBodyCapped(t *testing.T) {
	body := strings.Repeat("b", 10000)
	resp := &http.Response{StatusCode: 429, Body: io.NopCloser(strings.NewReader(body))}
	var rle *RateLimitError
	if !errors.As(CheckResponse(resp), &rle) {
		t.Fatal("CheckResponse returned no *RateLimitError")
	}
	if len(rle.RawBody) != 4096 {
		t.Errorf("len(RawBody) = %d, want 4096", len(rle.RawBody))
	}
	if got, _ := io.ReadAll(resp.Body); string(got) != body {
		t.Errorf("body after CheckResponse: %d bytes, want all %d", len(got), len(body))
	}
}

func TestRateLimitErrorAttemptsFromCallStats(t *testing.T) {
	ctx, stats := WithCallStats(context.Background())
	stats.recordAttempt()
	stats.recordAttempt()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, testURL, nil)
	err := CheckResponse(&http.Response{StatusCode: 429, Request: req, Body: http.NoBody})
	if want := "ratewise: rate limited (429 Too Many Requests) after 2 attempts"; err == nil || err.Error() != want {
		t.Errorf("CheckResponse = %v, want %q", err, want)
	}
}

func TestWithBudget(t *testing.T) {
	if _, ok := BudgetLeft(context.Background()); ok {
		t.Error("BudgetLeft reported a budget on a bare context")
	}
	for _, tt := range []struct{ give, want time.Duration }{{time.Minute, time.Minute}, {0, 0}, {-time.Second, 0}} {
		if got, ok := BudgetLeft(WithBudget(context.Background(), tt.give)); !ok || got != tt.want {
			t.Errorf("BudgetLeft(WithBudget(%v)) = %v, %v; want %v, true", tt.give, got, ok, tt.want)
		}
	}
}

// A refusal's reason and a breaker's state are typed, and read as the
// strings they always were: in messages, in JSON, and in %s.
func TestTypedReasonsMarshalAsTheirStrings(t *testing.T) {
	for reason, want := range map[LimitReason]string{
		LimitFailFast: "fail-fast", LimitMaxWait: "max-wait", LimitMaxQueue: "max-queue", LimitStoreUnavailable: "store-unavailable",
	} {
		js, err := json.Marshal(&ClientLimitError{Scope: "api", Key: "k", Reason: reason})
		if err != nil || !strings.Contains(string(js), `"Reason":"`+want+`"`) {
			t.Errorf("json of a %s refusal = %s, %v; want Reason %q", want, js, err, want)
		}
		if msg := (&ClientLimitError{Scope: "api", Reason: reason}).Error(); !strings.Contains(msg, "("+want+")") {
			t.Errorf("message %q, want (%s)", msg, want)
		}
	}
	js, err := json.Marshal(&CircuitOpenError{Key: "k", State: BreakerHalfOpen})
	if err != nil || !strings.Contains(string(js), `"state":"half-open"`) {
		t.Errorf("json of a half-open breaker's error = %s, %v", js, err)
	}
	if msg := (&CircuitOpenError{Key: "k", State: BreakerOpen, Failures: 5}).Error(); !strings.Contains(msg, "is open after 5 failures") {
		t.Errorf("message %q, want it to say open", msg)
	}
}
