package ratewise

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Every invalid option New records comes back from NewTransport, with no
// transport, as the same error each RoundTrip of New's transport returns.
func TestNewTransportReturnsEveryConfigurationError(t *testing.T) {
	badLimit := WithLimit(Limit{Name: "api", Rate: -5})
	badRetry := WithRetry(RetryPolicy{MaxAttempts: -1})
	badBreaker := WithBreaker(BreakerPolicy{Cooldown: -time.Second})
	badPause := WithPause(PausePolicy{Spread: -time.Second})
	badPreset := WithPreset(Preset{Name: "p", Limits: []Limit{{Name: "preset limit", Burst: -1}}})
	tests := []struct {
		name string
		opts []Option
		want []string
	}{
		{"limit", []Option{badLimit}, []string{`ratewise: Limit "api": Rate (-5) must not be negative`}},
		{"unnamed limit", []Option{WithLimit(Limit{MaxQueue: -1})}, []string{`Limit "limit 1": MaxQueue (-1)`}},
		{"limit fields", []Option{WithLimit(Limit{Name: "two", Rate: -1, MaxConcurrent: -2})},
			[]string{`Limit "two": Rate (-1)`, `Limit "two": MaxConcurrent (-2)`}},
		{"retry", []Option{badRetry}, []string{"ratewise: RetryPolicy.MaxAttempts (-1) must be at least 1"}},
		{"breaker", []Option{badBreaker}, []string{"ratewise: BreakerPolicy.Cooldown"}},
		{"pause", []Option{badPause}, []string{"ratewise: PausePolicy.Spread (-1s) must not be negative"}},
		{"preset", []Option{badPreset}, []string{`Limit "preset limit": Burst (-1)`}},
		{"all at once", []Option{badLimit, badRetry, WithLogger(nil), badBreaker, badPause, badPreset},
			[]string{`Limit "api"`, "RetryPolicy.MaxAttempts", "BreakerPolicy.Cooldown", "PausePolicy.Spread", `Limit "preset limit"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTransport(nil, tt.opts...)
			if tr != nil || err == nil {
				t.Fatalf("NewTransport = %v, %v; want no transport and an error", tr, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewTransport error %q does not say %q", err, w)
				}
			}
			if got := len(strings.Split(err.Error(), "\n")); got != len(tt.want) {
				t.Errorf("NewTransport error has %d lines, want one per problem (%d):\n%v", got, len(tt.want), err)
			}
			_, rtErr := New(nil, tt.opts...).RoundTrip(mustRequest(t, http.MethodGet, nil))
			if rtErr == nil || rtErr.Error() != err.Error() {
				t.Errorf("RoundTrip of New's transport = %v, want NewTransport's error %v", rtErr, err)
			}
		})
	}
}

// A valid configuration gives a nil error and a transport that works as
// New's does.
func TestNewTransportValidConfigurationWorks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "1"), answer(200))
		tr, err := NewTransport(s.mock(), WithLimit(Limit{Name: "api", Rate: 10, Burst: 2, MaxConcurrent: 4}),
			WithRetry(RetryPolicy{MaxAttempts: 3}), WithBreaker(BreakerPolicy{}), WithPause(PausePolicy{MaxPause: time.Minute}),
			WithPreset(Moderate()), WithLogger(nil), nil)
		if err != nil || tr == nil {
			t.Fatalf("NewTransport = %v, %v; want a transport and no error", tr, err)
		}
		resp, err := tr.RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(context.Background()))
		if err != nil || resp.StatusCode != 200 || s.calls() != 2 {
			t.Fatalf("RoundTrip = %v, %v after %d server calls; want 200 after the 429's retry", resp, err, s.calls())
		}
		_ = resp.Body.Close()
	})
	if tr, err := NewTransport(nil); err != nil || tr == nil || tr.base != http.DefaultTransport {
		t.Errorf("NewTransport(nil) = %v, %v; want a transport over http.DefaultTransport", tr, err)
	}
}
