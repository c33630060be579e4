package ratewisetest

import (
	"io"
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// result is what a test keeps of one response.
type result struct {
	status int
	header http.Header
	body   string
}

// newServer starts a server for cfg that is closed when the test ends.
func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s := NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// get sends GET url through c, with the header key: value when key is set,
// and fails the test on a transport error.
func get(t *testing.T, c *http.Client, url, key, value string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(key, value)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of GET %s: %v", url, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// getN sends n GETs to s and returns the results in order.
func getN(t *testing.T, s *Server, n int) []result {
	t.Helper()
	rs := make([]result, n)
	for i := range rs {
		rs[i] = get(t, s.Client(), s.URL, "", "")
	}
	return rs
}

// statuses returns the status codes of rs.
func statuses(rs []result) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.status
	}
	return out
}
