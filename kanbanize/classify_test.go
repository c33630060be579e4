package kanbanize

import (
	"net/http"
	"testing"

	"github.com/ratewise/ratewise"
)

// TestClassify: gateway errors are retried, and one that says when to
// come back stays rate-limited, so its hint is waited for.
func TestClassify(t *testing.T) {
	tests := []struct {
		status int
		header http.Header
		want   ratewise.Class
	}{
		{status: 503, header: http.Header{"Retry-After": {"5"}}, want: ratewise.RateLimited},
		{status: 503, want: ratewise.Retryable},
		{status: 502, want: ratewise.Retryable},
		{status: 504, want: ratewise.Retryable},
		{status: 429, want: ratewise.RateLimited},
		{status: 500, want: ratewise.Final},
		{status: 404, want: ratewise.Final},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: tt.header, Body: http.NoBody}
		if got := classify(resp); got != tt.want {
			t.Errorf("classify(%d %v) = %v, want %v", tt.status, tt.header, got, tt.want)
		}
	}
}
