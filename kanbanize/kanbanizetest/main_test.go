package kanbanizetest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// api is the base URL of in-process requests: any host will do.
const api = "http://kanbanize.test/api/v2"

// result is what a test keeps of one response.
type result struct {
	status int
	header http.Header
	body   string
}

// do sends method url through rt with the apikey header set to key, or
// without one when key is empty, and fails the test on a transport error.
func do(t *testing.T, rt http.RoundTripper, method, url, key string) result {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("apikey", key)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of %s %s: %v", method, url, err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// get sends GET api+path in-process to s with the default key.
func get(t *testing.T, s *Server, path string) result {
	t.Helper()
	return do(t, s.Transport(), http.MethodGet, api+path, DefaultAPIKey)
}

// apiError is the error body of the API.
type apiError struct {
	Error struct {
		Code      string          `json:"code"`
		Message   string          `json:"message"`
		Reference string          `json:"reference"`
		Details   json.RawMessage `json:"details"`
	} `json:"error"`
}

// errorOf decodes r's body as the API's error body, failing the test when
// it is not one.
func errorOf(t *testing.T, r result) apiError {
	t.Helper()
	var e apiError
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" || e.Error.Reference == "" {
		t.Errorf("error body = %q, want code, message and reference all set", r.body)
	}
	if got := r.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type of an error = %q, want %q", got, "application/json")
	}
	return e
}
