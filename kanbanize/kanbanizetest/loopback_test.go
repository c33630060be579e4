package kanbanizetest

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// client returns a client that opens a connection per request, so that
// http.Transport never retries a request reset on a reused connection and
// no idle connection outlives the test.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

func TestLoopback(t *testing.T) {
	s := New(Config{Scripts: map[Endpoint][]Fault{EndpointComments: {FaultReset}}})
	base := s.Start()
	defer s.Close()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("Start() = %q, want http://127.0.0.1:port", base)
	}
	if again := s.Start(); again != base {
		t.Errorf("second Start() = %q, want %q", again, base)
	}

	r := do(t, client().Transport, http.MethodGet, base+"/api/v2/cards/100", DefaultAPIKey)
	if want := get(t, s, "/cards/100"); r.status != 200 || r.body != want.body {
		t.Errorf("GET /cards/100 on loopback = %d %s, want 200 %s", r.status, r.body, want.body)
	}
	if r := do(t, client().Transport, http.MethodGet, base+"/api/v2/cards/100", ""); r.status != 401 {
		t.Errorf("GET without a key on loopback = %d, want 401", r.status)
	}

	req, err := http.NewRequest(http.MethodGet, base+"/api/v2/cards/100/comments", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("apikey", DefaultAPIKey)
	resp, err := client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Errorf("GET with FaultReset on loopback = %s, want a network error", resp.Status)
	}

	s.Close()
	s.Close()
	if resp, err := client().Get(base + "/api/v2/cards/100"); err == nil {
		resp.Body.Close()
		t.Errorf("GET after Close = %s, want a network error", resp.Status)
	}
	if r := get(t, s, "/cards/100"); r.status != 200 {
		t.Errorf("in-process GET after Close = %d, want 200", r.status)
	}
}

func TestStartAfterClosePanics(t *testing.T) {
	s := New(Config{})
	s.Close()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Start called after Close") {
			t.Errorf("Start() after Close panicked with %v, want a message about Close", r)
		}
	}()
	s.Start()
}

func TestCloseCutsLatencyShort(t *testing.T) {
	s := New(Config{Latency: time.Hour})
	base := s.Start()
	errc := make(chan error, 1)
	go func() {
		resp, err := client().Get(base + "/api/v2/cards/100")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Requests == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the request did not reach the server within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	s.Close()
	if err := <-errc; err == nil {
		t.Errorf("GET during Close = nil error, want a network error")
	}
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Close took %v with a request waiting out an hour's latency, want it cut short", got)
	}
}
