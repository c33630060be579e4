package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
	"github.com/ratewise/ratewise/redis/redistest"
)

// secretToken is the bearer token of the HTTP tests, which no log line
// may show.
const secretToken = "mcp-bearer-token-9b3e"

// httpServer is the built binary serving -http 127.0.0.1:0.
type httpServer struct {
	cmd  *exec.Cmd
	url  string // http://127.0.0.1:port
	logs *syncBuffer
	done chan error
}

// startHTTP starts the binary on a free loopback port with env, and waits
// for the address it logs.
func startHTTP(t *testing.T, env ...string) *httpServer {
	t.Helper()
	s := &httpServer{cmd: exec.Command(buildServer(t), "-http", "127.0.0.1:0"), logs: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd.Env = append(os.Environ(), env...)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			fmt.Fprintln(s.logs, lines.Text())
			var line struct{ Event, Addr string }
			if json.Unmarshal(lines.Bytes(), &line) == nil && line.Event == "start" && line.Addr != "" {
				addr <- line.Addr
			}
		}
		s.done <- s.cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case err := <-s.done:
		t.Fatalf("the server ended before it served: %v\n%s", err, s.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the server did not say where it serves\n%s", s.logs.String())
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

// bearer adds the token to every request of a client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(req)
}

// connect opens an MCP session over Streamable HTTP, with token when set.
func (s *httpServer) connect(t *testing.T, ctx context.Context, token string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearer{token, http.DefaultTransport}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connecting over Streamable HTTP: %v\n%s", err, s.logs.String())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// readCard calls read_card_with_retry for id and returns its envelope.
func readCard(ctx context.Context, cs *mcp.ClientSession, id int) (kanbanize.Envelope, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_card_with_retry", Arguments: map[string]any{"card_id": id}})
	if err != nil {
		return kanbanize.Envelope{}, err
	}
	var env kanbanize.Envelope
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil || res.IsError {
		return env, fmt.Errorf("card %d: %s", id, text(res))
	}
	return env, nil
}

// Three agents, each with its own session, read 30 cards at once through
// one server on the Standard plan (30 a minute, 600 an hour), on a clock
// twenty times faster: 30 at once, then 10 a second. They share one
// pace: the fake API refuses at most one request, gets at most 5% more
// requests than the calls need, and the run takes at most 1.10 × the
// plan's ideal. Real time: about six seconds.
func TestHTTPSessionsShareOnePace(t *testing.T) {
	const scale, cards, sessions = 20, 30, 3
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, PerMinute: 30, PerHour: 600, TimeScale: scale, PerAccount: true})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_PLAN=standard",
		"KANBANIZE_TIME_SCALE="+strconv.Itoa(scale), "KANBANIZE_MCP_RATE=1000", "KANBANIZE_MCP_BURST=1000", "KANBANIZE_MCP_TOKEN="+secretToken)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var css []*mcp.ClientSession
	for range sessions {
		css = append(css, srv.connect(t, ctx, secretToken))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range cards {
		cs := css[i%sessions]
		wg.Go(func() {
			if env, err := readCard(ctx, cs, 101+i%10); err != nil || len(env.PartialError) > 0 {
				t.Errorf("card %d: %v %v", 101+i%10, err, env.PartialError)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)

	// 3 requests a card: the first 30 at once, the other 60 at 10 a second.
	ideal := time.Duration(float64(cards*3-30) / (30.0 * scale / 60) * float64(time.Second))
	st := fake.Stats()
	t.Logf("%d cards by %d sessions in %v (ideal %v): the fake API got %d requests, refused %d", cards, sessions, took, ideal, st.Requests, st.Limited)
	if st.Limited > 1 {
		t.Errorf("the fake API refused %d requests, want at most 1: the sessions share one pace", st.Limited)
	}
	if most := cards * 3 * 105 / 100; st.Requests > most {
		t.Errorf("the fake API got %d requests for %d, want at most %d", st.Requests, cards*3, most)
	}
	if took > ideal*110/100 {
		t.Errorf("%v, past 1.10 × the ideal %v", took, ideal)
	}
	res, err := css[0].CallTool(ctx, &mcp.CallToolParams{Name: "get_throttle_stats", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if stats := text(res); !strings.Contains(stats, `"name":"kanbanize standard per minute"`) || !strings.Contains(stats, `"key":"apikey:`) || !strings.Contains(stats, `"name":"learned"`) {
		t.Errorf("get_throttle_stats = %s, want the plan's scopes by the key's hash and the learned one", stats)
	}
	wantNoSecret(t, srv.logs.String()+text(res))
}

// Two replicas of the server, each with its own agent, share the
// account's pace through one Redis (KANBANIZE_REDIS_URL): as one client,
// the fake API refuses at most one request and gets at most 5% more than
// the calls need. Real time: about six seconds.
func TestHTTPReplicasShareOnePaceThroughRedis(t *testing.T) {
	const scale, cards = 20, 30
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, PerMinute: 30, PerHour: 600, TimeScale: scale, PerAccount: true})
	defer fake.Close()
	redis := redistest.Start(t)
	env := []string{"KANBANIZE_BASE_URL=" + fake.Start(), "KANBANIZE_API_KEY=" + secretKey, "KANBANIZE_PLAN=standard",
		"KANBANIZE_TIME_SCALE=" + strconv.Itoa(scale), "KANBANIZE_MCP_RATE=1000", "KANBANIZE_MCP_BURST=1000",
		"KANBANIZE_REDIS_URL=redis://" + redis.Addr + "/0"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	css := []*mcp.ClientSession{startHTTP(t, env...).connect(t, ctx, ""), startHTTP(t, env...).connect(t, ctx, "")}
	var wg sync.WaitGroup
	for i := range cards {
		cs := css[i%len(css)]
		wg.Go(func() {
			if env, err := readCard(ctx, cs, 101+i%10); err != nil || len(env.PartialError) > 0 {
				t.Errorf("card %d: %v %v", 101+i%10, err, env.PartialError)
			}
		})
	}
	wg.Wait()
	st := fake.Stats()
	t.Logf("%d cards by 2 replicas: the fake API got %d requests, refused %d", cards, st.Requests, st.Limited)
	if st.Limited > 1 {
		t.Errorf("the fake API refused %d requests, want at most 1: the replicas share one pace", st.Limited)
	}
	if most := cards * 3 * 105 / 100; st.Requests > most {
		t.Errorf("the fake API got %d requests for %d, want at most %d", st.Requests, cards*3, most)
	}
}

// A request without the bearer token gets 401 before anything reads it,
// one with it is served; and the server refuses to listen beyond
// loopback without a token.
func TestHTTPRequiresTheToken(t *testing.T) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_MCP_TOKEN="+secretToken)
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + secretToken + "x"} {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_card","arguments":{"card_id":101}}}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: %d, want 401 with WWW-Authenticate", auth, resp.StatusCode)
		}
	}
	if n := fake.Stats().Requests; n != 0 {
		t.Errorf("the fake API got %d requests from unauthenticated calls", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := readCard(ctx, srv.connect(t, ctx, secretToken), 101); err != nil {
		t.Errorf("with the token: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.url+"/mcp", nil)
	req.Header.Set("Authorization", "bearer "+secretToken) // the scheme's case does not matter (RFC 9110)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode == http.StatusUnauthorized {
		t.Errorf("a lower-case bearer scheme: %v %v, want it let through", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err := http.Get(srv.url + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	wantNoSecret(t, srv.logs.String())

	cmd := exec.Command(buildServer(t), "-http", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey)
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(string(out), "KANBANIZE_MCP_TOKEN") {
		t.Errorf("-http 0.0.0.0:0 without a token: exit %d, %v, %q; want exit 2 naming KANBANIZE_MCP_TOKEN", code, err, out)
	}
}

// An agent past the endpoint's limit gets 429 with Retry-After and the
// RateLimit fields, and the Kanbanize API sees none of its requests.
func TestHTTPAdmissionRefusesARunawayAgent(t *testing.T) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_MCP_RATE=0.5", "KANBANIZE_MCP_BURST=3")
	codes := map[int]int{}
	var refusal http.Header
	for range 6 {
		req, _ := http.NewRequest(http.MethodPost, srv.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_card","arguments":{"card_id":101}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			refusal = resp.Header
		}
	}
	if codes[http.StatusTooManyRequests] != 3 {
		t.Errorf("answers %v, want 3 refused past the burst of 3", codes)
	}
	if refusal.Get("Retry-After") == "" || refusal.Get("RateLimit") == "" || refusal.Get("RateLimit-Policy") == "" {
		t.Errorf("a refusal's header %v, want Retry-After, RateLimit and RateLimit-Policy", refusal)
	}
	if n := fake.Stats().Requests; n != 0 {
		t.Errorf("the fake API got %d requests, want none: the calls had no session", n)
	}
}

// SIGTERM while a call waits for the API: past the grace the call's
// context ends, the tool answers with what it read (here, its error: the
// card itself was not read), the answer reaches the agent, and the server
// exits 0 within the grace and a second or two.
func TestHTTPShutsDownMidCall(t *testing.T) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, Latency: 20 * time.Second})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_MCP_SHUTDOWN_GRACE=300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := srv.connect(t, ctx, "")
	ended := make(chan error, 1)
	go func() {
		_, err := readCard(ctx, cs, 101)
		ended <- err
	}()
	time.Sleep(200 * time.Millisecond) // the call is waiting for the fake's answer
	sent := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		srv.done <- err // for the cleanup
		if took := time.Since(sent); err != nil || took > 300*time.Millisecond+2*time.Second {
			t.Errorf("the server exited %v after %v, want 0 within the grace and a second or two", err, took)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not exit after SIGTERM\n%s", srv.logs.String())
	}
	select {
	case err := <-ended:
		// Nothing was read yet: the tool answers with its error, and the
		// answer reaches the agent before the server exits.
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Errorf("the call in flight ended with %v, want the tool's answer that it was canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("the call in flight did not end after the server exited")
	}
	if !strings.Contains(srv.logs.String(), `"event":"shutdown"`) || !strings.Contains(srv.logs.String(), `"event":"stop"`) {
		t.Errorf("the logs lack the shutdown and the stop:\n%s", srv.logs.String())
	}
}

// wantNoSecret fails when logs show the API key or the bearer token.
func wantNoSecret(t *testing.T, logs string) {
	t.Helper()
	for _, secret := range []string{secretKey, secretToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs show a secret %q", secret[:8]+"...")
		}
	}
}

// The streams a session holds open for the server's messages carry no
// call: a shutdown ends them at once, not after the grace. The client
// here listens for tool-list changes, which opens such a stream.
func TestHTTPShutdownEndsIdleStreamsAtOnce(t *testing.T) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_MCP_SHUTDOWN_GRACE=10s")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"},
		&mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := readCard(ctx, cs, 101); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the streams are open
	sent := time.Now()
	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		if took := time.Since(sent); err != nil || took > 3*time.Second {
			t.Errorf("the server exited %v after %v, want 0 well before its 10s grace: no call was in flight", err, took)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the server did not exit after SIGTERM\n%s", srv.logs.String())
	}
}

// A call with a progress token is told of its waits over Streamable HTTP
// as over stdio: notifications/progress while it waits for the API.
func TestHTTPProgressNotifications(t *testing.T) {
	// Refusals with Retry-After: 1, so that each wait lasts a second, time
	// enough for its notification on a loaded machine too.
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, RetryAfter: kanbanizetest.RetryAfterSeconds,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointComments: repeat(kanbanizetest.Fault429, 2)}})
	defer fake.Close()
	srv := startHTTP(t, "KANBANIZE_BASE_URL="+fake.Start(), "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_PLAN=6000/100000",
		"KANBANIZE_RETRY_INITIAL_DELAY=5ms", "KANBANIZE_RETRY_MAX_DELAY=20ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var progress []string
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Message)
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.url + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "read_card_with_retry", Arguments: map[string]any{"card_id": 104}}
	params.SetProgressToken("http-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("read_card_with_retry: %v %s", err, text(res))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || !strings.Contains(progress[0], "comments") {
		t.Errorf("progress notifications %q, want the comments' waits", progress)
	}
}
