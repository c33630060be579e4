package ratewisetest

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jarcoal/httpmock"
)

const apiURL = "https://api.example.test/items"

// mockClient returns a client whose every GET of apiURL is answered by r.
func mockClient(r httpmock.Responder) *http.Client {
	mt := httpmock.NewMockTransport()
	mt.RegisterResponder(http.MethodGet, apiURL, r)
	return &http.Client{Transport: mt}
}

func TestRateLimited(t *testing.T) {
	tests := []struct {
		give string
		want []string // Retry-After values; nil means no header
	}{
		{give: "", want: nil},
		{give: "3", want: []string{"3"}},
		{give: "Wed, 21 Oct 2015 07:28:00 GMT", want: []string{"Wed, 21 Oct 2015 07:28:00 GMT"}},
	}
	for _, tt := range tests {
		r := get(t, mockClient(RateLimited(tt.give)), apiURL, "", "")
		if r.status != 429 {
			t.Errorf("RateLimited(%q) status = %d, want 429", tt.give, r.status)
		}
		if got := r.header.Values("Retry-After"); !slices.Equal(got, tt.want) {
			t.Errorf("RateLimited(%q) Retry-After = %q, want %q", tt.give, got, tt.want)
		}
		if r.body != limitedBody || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("RateLimited(%q) = %q (%s), want %q (application/json)", tt.give, r.body, r.header.Get("Content-Type"), limitedBody)
		}
	}
}

func TestRateLimitedFreshResponses(t *testing.T) {
	r := RateLimited("1")
	req, _ := http.NewRequest(http.MethodGet, apiURL, nil)
	first, _ := r(req)
	first.Header.Set("Retry-After", "changed")
	if _, err := io.ReadAll(first.Body); err != nil {
		t.Fatal(err)
	}
	second, _ := r(req)
	if got := second.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After after changing the first response = %q, want %q", got, "1")
	}
	if b, _ := io.ReadAll(second.Body); string(b) != limitedBody {
		t.Errorf("second body = %q, want %q", b, limitedBody)
	}
}

func TestRateLimitedThen(t *testing.T) {
	c := mockClient(RateLimitedThen(2, "3", httpmock.NewStringResponder(200, "ok")))
	tests := []struct {
		want       int
		retryAfter string
	}{
		{want: 429, retryAfter: "3"},
		{want: 429, retryAfter: "3"},
		{want: 200},
		{want: 200},
	}
	for i, tt := range tests {
		r := get(t, c, apiURL, "", "")
		if r.status != tt.want {
			t.Errorf("call %d: status = %d, want %d", i+1, r.status, tt.want)
		}
		if got := r.header.Get("Retry-After"); got != tt.retryAfter {
			t.Errorf("call %d: Retry-After = %q, want %q", i+1, got, tt.retryAfter)
		}
	}
}

func TestSequence(t *testing.T) {
	c := mockClient(Sequence(
		httpmock.NewStringResponder(200, "a"),
		RateLimited("5"),
		httpmock.NewStringResponder(201, "b"),
	))
	var got []string
	for range 5 {
		r := get(t, c, apiURL, "", "")
		got = append(got, http.StatusText(r.status)+":"+r.body)
	}
	want := []string{"OK:a", "Too Many Requests:" + limitedBody, "Created:b", "Created:b", "Created:b"}
	if !slices.Equal(got, want) {
		t.Errorf("Sequence answers = %q, want %q", got, want)
	}
}

func TestResponderPanics(t *testing.T) {
	tests := []struct {
		name string
		give func()
		want string
	}{
		{name: "Sequence()", give: func() { Sequence() }, want: "at least one responder"},
		{name: "Sequence(r, nil)", give: func() { Sequence(RateLimited(""), nil) }, want: "responder 1 is nil"},
		{name: "RateLimitedThen(1, \"\", nil)", give: func() { RateLimitedThen(1, "", nil) }, want: "non-nil then"},
	}
	for _, tt := range tests {
		func() {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tt.want) {
					t.Errorf("%s panicked with %q, want a panic containing %q", tt.name, msg, tt.want)
				}
			}()
			tt.give()
		}()
	}
}

// countConcurrent calls r n times at once and counts the statuses.
func countConcurrent(t *testing.T, r httpmock.Responder, n int) map[int]int {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		counts = map[int]int{}
	)
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, apiURL, nil)
			resp, err := r(req)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.ReadAll(resp.Body)
			resp.Header.Set("X-Seen", "yes") // a shared map would race here
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return counts
}

func TestRespondersConcurrent(t *testing.T) {
	tests := []struct {
		name string
		give httpmock.Responder
		want map[int]int
	}{
		{
			name: "RateLimitedThen to 200",
			give: RateLimitedThen(10, "1", func(*http.Request) (*http.Response, error) {
				return httpmock.NewStringResponse(200, "ok"), nil
			}),
			want: map[int]int{429: 10, 200: 40},
		},
		{
			name: "Sequence",
			give: Sequence(RateLimited("1"), RateLimited("1"), func(*http.Request) (*http.Response, error) {
				return httpmock.NewStringResponse(200, "ok"), nil
			}),
			want: map[int]int{429: 2, 200: 48},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := countConcurrent(t, tt.give, 50)
			if !maps.Equal(got, tt.want) {
				t.Errorf("statuses = %v, want %v", got, tt.want)
			}
		})
	}
}
