package ratewise

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *figuresOnly {
		pattern, err := figureTests()
		if err != nil {
			fmt.Fprintln(os.Stderr, "finding the tests that hold figures:", err)
			os.Exit(2)
		}
		flag.Set("test.run", pattern)
	}
	goleak.VerifyTestMain(m)
}

const testURL = "https://api.example.com/items"

// sleepToThisDecade moves a testing/synctest bubble's clock, which starts
// in 2000, to 1 January 2026 and past midnight by into: a Unix time of
// 2000 is below the 10^9 seconds that tell a Unix reset from a delta.
func sleepToThisDecade(into time.Duration) {
	time.Sleep(time.Until(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(into)))
}

// step is one scripted answer: a response, or err for a network failure.
type step struct {
	status int
	header http.Header
	body   string
	err    error
}

func answer(status int, kv ...string) step {
	s := step{status: status, header: http.Header{}, body: http.StatusText(status)}
	for i := 0; i+1 < len(kv); i += 2 {
		s.header.Add(kv[i], kv[i+1])
	}
	return s
}

// script is a fake API that answers each request with the next step (the
// last one repeats) and records what it received: when, and which body.
// It counts the response bodies it hands out and how many were closed.
type script struct {
	mu       sync.Mutex
	steps    []step
	times    []time.Time
	bodies   [][]byte
	methods  []string
	opened   int
	closedN  int
	received int
}

func newScript(steps ...step) *script { return &script{steps: steps} }

// mock returns a fresh httpmock transport serving s at testURL for every
// method.
func (s *script) mock() *httpmock.MockTransport {
	mt := httpmock.NewMockTransport()
	mt.RegisterNoResponder(s.respond)
	return mt
}

func (s *script) respond(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.steps[min(s.received, len(s.steps)-1)]
	s.received++
	s.times = append(s.times, time.Now())
	s.bodies = append(s.bodies, body)
	s.methods = append(s.methods, req.Method)
	if st.err != nil {
		return nil, st.err
	}
	s.opened++
	return &http.Response{
		StatusCode: st.status,
		Status:     http.StatusText(st.status),
		Header:     st.header.Clone(),
		Body:       &countedBody{Reader: bytes.NewReader([]byte(st.body)), s: s},
		Request:    req,
	}, nil
}

// reset makes s answer from steps anew, its request count back at zero.
func (s *script) reset(steps ...step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps, s.received = steps, 0
}

func (s *script) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

// closed returns how many response bodies were handed out and how many of
// them were closed.
func (s *script) closed() (opened, closed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened, s.closedN
}

// assertAllClosed fails t unless every response body handed out was
// closed.
func (s *script) assertAllClosed(t *testing.T) {
	t.Helper()
	if opened, closed := s.closed(); opened != closed {
		t.Errorf("%d response bodies handed out, %d closed", opened, closed)
	}
}

// offsets returns when each request arrived, relative to start.
func (s *script) offsets(start time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, len(s.times))
	for i, at := range s.times {
		out[i] = at.Sub(start)
	}
	return out
}

type countedBody struct {
	*bytes.Reader
	s    *script
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() {
		b.s.mu.Lock()
		b.s.closedN++
		b.s.mu.Unlock()
	})
	return nil
}

// result is what a test call saw: the final status and body, the call's
// stats, and how long the call took.
type result struct {
	status  int
	body    string
	stats   *CallStats
	elapsed time.Duration
}

// get sends one GET through a Transport with policy p over s, reads the
// final body, and fails t if the call returns an error.
func (s *script) get(t *testing.T, ctx context.Context, p RetryPolicy) result {
	t.Helper()
	ctx, stats := WithCallStats(ctx)
	start := time.Now()
	resp, err := New(s.mock(), WithRetry(p)).RoundTrip(mustRequest(t, http.MethodGet, nil).WithContext(ctx))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	body := readAll(t, resp)
	return result{status: resp.StatusCode, body: body, stats: stats, elapsed: time.Since(start)}
}

func mustRequest(t *testing.T, method string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, testURL, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	_ = resp.Body.Close()
	return string(b)
}
