package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

const secretKey = "mcp-secret-key-5d21"

// session is a test client connected in memory to a server over a fake
// API. Everything the client saw and the server logged is kept, to look
// for secrets.
type session struct {
	*mcp.ClientSession
	fake *kanbanizetest.Server
	logs *syncBuffer

	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	seen     []string // every result and notification, as JSON
}

// syncBuffer is a buffer written and read from several goroutines. Its
// bytes.Buffer is a field, not embedded: an embedded one would lend it
// ReadFrom, which os/exec calls to copy a child's stderr, past the lock.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func connect(t *testing.T, cfg kanbanizetest.Config) *session {
	t.Helper()
	return connectWith(t, cfg, nil)
}

// connectWith is connect, with tweak (when set) changing the tools before
// the server is made.
func connectWith(t *testing.T, cfg kanbanizetest.Config, tweak func(*tools)) *session {
	t.Helper()
	cfg.APIKey = secretKey
	s := &session{fake: kanbanizetest.New(cfg), logs: &syncBuffer{}}
	log := slog.New(slog.NewJSONHandler(s.logs, nil))
	client, err := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: s.fake.Transport()}),
		kanbanize.WithLogger(log)) // as main makes it
	if err != nil {
		t.Fatal(err)
	}
	tl := newTools(client, kanbanize.RetryOptions{}, log)
	if tweak != nil {
		tweak(tl)
	}
	server, err := tl.server()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.progress = append(s.progress, req.Params)
			s.keep(req.Params)
		},
	})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ClientSession = cs
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
		if all := strings.Join(s.seen, "\n") + s.logs.String(); strings.Contains(all, secretKey) {
			t.Errorf("the API key appears in the output:\n%s", all)
		}
	})
	return s
}

// keep records v as JSON; s.mu is held.
func (s *session) keep(v any) {
	b, _ := json.Marshal(v)
	s.seen = append(s.seen, string(b))
}

// call calls a tool, with a progress token when token is set.
func (s *session) call(t *testing.T, tool string, args map[string]any, token any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if token != nil {
		params.SetProgressToken(token)
	}
	res, err := s.CallTool(context.Background(), params)
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	s.mu.Lock()
	s.keep(res)
	s.mu.Unlock()
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsList(t *testing.T) {
	s := connect(t, kanbanizetest.Config{})
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	if len(tools) != 3 || tools["read_card"] == nil || tools["read_card_with_retry"] == nil || tools["get_throttle_stats"] == nil {
		t.Fatalf("tools = %v, want read_card, read_card_with_retry and get_throttle_stats", tools)
	}
	if got := tools["read_card_with_retry"].Description; got != readCardWithRetryDescription {
		t.Errorf("description = %q", got)
	}
	schema, _ := json.Marshal(tools["read_card_with_retry"].InputSchema)
	var parsed struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Description string          `json:"description"`
			Default     json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(schema, &parsed); err != nil {
		t.Fatal(err)
	}
	wantDefaults := map[string]string{"max_attempts": "10", "initial_delay_ms": "5000", "max_delay_ms": "300000", "multiplier": "2",
		"full_jitter": "true", "respect_retry_after": "true", "total_wait_cap_ms": "1200000", "fail_on_partial": "false"}
	for name, want := range wantDefaults {
		p, ok := parsed.Properties[name]
		if !ok || string(p.Default) != want || p.Description == "" {
			t.Errorf("%s: default %s, description %q; want default %s and a description", name, p.Default, p.Description, want)
		}
	}
	if len(parsed.Required) != 1 || parsed.Required[0] != "card_id" || parsed.Properties["card_id"].Description == "" {
		t.Errorf("required %v, want just card_id, described", parsed.Required)
	}
	// card_id takes a string or a number, in both tools; every tool says
	// what it returns.
	for name, tool := range tools {
		if tool.OutputSchema == nil {
			t.Errorf("%s has no output schema", name)
		}
		if name == "get_throttle_stats" {
			continue
		}
		in, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(in), `"card_id":{"description":`) || !strings.Contains(string(in), `"type":["string","integer"]`) {
			t.Errorf("%s input schema = %s, want card_id of type [\"string\",\"integer\"]", name, in)
		}
	}
}

func TestReadCardWithRetryPartial(t *testing.T) {
	s := connect(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterNone,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointSubtasks: repeat(kanbanizetest.Fault429, 10)}})
	res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "max_attempts": 2, "initial_delay_ms": 1}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	var env kanbanize.Envelope
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env.Completed["subtasks"] || !env.Completed["comments"] || env.PartialError["subtasks"] != "max retries exceeded (429)" || env.Attempts["subtasks"] != 2 {
		t.Errorf("envelope = %+v, want the subtasks failed after 2 attempts", env)
	}
	if env.Data.Title != "Migrate invoices to the new schema" {
		t.Errorf("title = %q", env.Data.Title)
	}
	// kanbanize-rate-limit-plan.md §8: the part the call went on without
	// is logged, as JSON on stderr.
	want := `"level":"WARN","msg":"card read without its subtasks","event":"rate_partial","endpoint":"subtasks","error":"max retries exceeded (429)","attempts":2,"card_id":"102"}`
	if !strings.Contains(s.logs.String(), want) {
		t.Errorf("the partial read was not logged as %s:\n%s", want, s.logs.String())
	}

	failing := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "max_attempts": 2, "initial_delay_ms": 1, "fail_on_partial": true}, nil)
	if !failing.IsError || !strings.Contains(text(failing), "subtasks") {
		t.Errorf("with fail_on_partial: error %v, %q; want a tool error about the subtasks", failing.IsError, text(failing))
	}
}

func TestProgressNotifications(t *testing.T) {
	// The comments' 429 asks for a second: the notification of that wait
	// goes out during it, in fake time, before the result.
	synctest.Test(t, func(t *testing.T) {
		s := connect(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds,
			Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointComments: {kanbanizetest.Fault429}}})
		res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "initial_delay_ms": 1}, "token-1")
		if res.IsError {
			t.Fatalf("tool error: %s", text(res))
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.progress) == 0 {
			t.Fatal("no progress notification during a 429 wait")
		}
		// The subtasks, read beside the comments, may wait first for the
		// pause the 429 set on the key: look for the comments' retry.
		i := slices.IndexFunc(s.progress, func(p *mcp.ProgressNotificationParams) bool { return strings.Contains(p.Message, "for comments") })
		if i < 0 {
			t.Fatalf("progress = %+v, none for the comments", s.progress)
		}
		p := s.progress[i]
		if p.ProgressToken != "token-1" || p.Message != "waiting 1.0s for comments (attempt 2/10)" {
			t.Errorf("progress = %+v, want token-1 and \"waiting 1.0s for comments (attempt 2/10)\"", p)
		}
		for j := 1; j < len(s.progress); j++ {
			if s.progress[j].Progress <= s.progress[j-1].Progress {
				t.Errorf("progress values %v then %v: want them increasing", s.progress[j-1].Progress, s.progress[j].Progress)
			}
		}
	})
}

func TestThrottleStats(t *testing.T) {
	s := connect(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterNone,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointComments: {kanbanizetest.Fault429}}})
	if res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "initial_delay_ms": 1}, nil); res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	res := s.call(t, "get_throttle_stats", nil, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	var got map[string]any
	raw := text(res)
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	// The card, the subtasks, and the comments twice: one 429, one retry.
	for _, want := range []string{`"calls":3`, `"attempts":4`, `"retries":1`, `"rate_limit_hits":1`, `"succeeded":3`, `"breakers":[`} {
		if !strings.Contains(raw, want) {
			t.Errorf("get_throttle_stats = %s, lacks %s", raw, want)
		}
	}
}

func TestNoProgressWithoutAToken(t *testing.T) {
	s := connect(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterNone,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointComments: {kanbanizetest.Fault429}}})
	if res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "initial_delay_ms": 1}, nil); res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.progress) != 0 {
		t.Errorf("%d progress notifications without a progress token, want none", len(s.progress))
	}
	if !strings.Contains(s.logs.String(), `"event":"rate_wait"`) {
		t.Errorf("the wait was not logged:\n%s", s.logs.String())
	}
}

func TestWrongKeyKeepsItSecret(t *testing.T) {
	s := connect(t, kanbanizetest.Config{})
	s.fake = kanbanizetest.New(kanbanizetest.Config{APIKey: "the-right-key"}) // the server's key is now wrong
	client, _ := kanbanize.NewClient("acme", secretKey, kanbanize.WithHTTPClient(&http.Client{Transport: s.fake.Transport()}))
	server, _ := newServer(client, kanbanize.RetryOptions{}, slog.New(slog.NewJSONHandler(s.logs, nil)))
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close(); _ = ss.Wait() }()
	for _, tool := range []string{"read_card", "read_card_with_retry"} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"card_id": "101"}})
		if err != nil || !res.IsError || !strings.Contains(text(res), "401") {
			t.Errorf("%s with a wrong key = %v, %v; want a 401 tool error", tool, res, err)
		}
		s.mu.Lock()
		s.keep(res) // checked for the key when the test ends
		s.mu.Unlock()
	}
}

func TestBadCardID(t *testing.T) {
	s := connect(t, kanbanizetest.Config{})
	for _, tool := range []string{"read_card", "read_card_with_retry"} {
		res := s.call(t, tool, map[string]any{"card_id": "the login bug"}, nil)
		if !res.IsError || !strings.Contains(text(res), "not a card ID or card URL") {
			t.Errorf("%s with a bad card_id: error %v, %q; want a tool error naming the problem", tool, res.IsError, text(res))
		}
	}
	if n := s.fake.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent for bad card IDs, want none", n)
	}
	res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "max_attempts": -3}, nil)
	if !res.IsError || !strings.Contains(text(res), "max_attempts (-3)") {
		t.Errorf("max_attempts -3: error %v, %q; want it named", res.IsError, text(res))
	}
}

func TestReadCard(t *testing.T) {
	s := connect(t, kanbanizetest.Config{})
	res := s.call(t, "read_card", map[string]any{"card_id": "https://acme.kanbanize.com/ctrl_board/1/cards/103/details/"}, nil)
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	var d kanbanize.CardDetails
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &d); err != nil || d.Card.CardID != 103 || len(d.Comments) != 3 {
		t.Errorf("read_card = %+v, %v", d, err)
	}
	// Today's behaviour: a 429 is an error, not retried.
	s2 := connect(t, kanbanizetest.Config{Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointCard: {kanbanizetest.Fault429}}})
	if res := s2.call(t, "read_card", map[string]any{"card_id": "103"}, nil); !res.IsError || s2.fake.Stats().Requests != 1 {
		t.Errorf("read_card on a 429: error %v after %d requests, want a tool error after 1", res.IsError, s2.fake.Stats().Requests)
	}
}

func TestCallsShareOneTransport(t *testing.T) {
	// One call's refusals, asking for a minute, pause the next call's
	// requests too: every tool call goes through the same transport and
	// cooldown.
	synctest.Test(t, func(t *testing.T) {
		s := connect(t, kanbanizetest.Config{PerMinute: 1, RetryAfter: kanbanizetest.RetryAfterSeconds})
		// One attempt and a second of budget: the first call does not wait
		// the pause out itself.
		res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "100", "max_attempts": 1,
			"initial_delay_ms": 1000, "total_wait_cap_ms": 1000}, nil)
		if res.IsError || !strings.Contains(text(res), "partial_error") {
			t.Fatalf("first call: %s, want the card, and comments and subtasks refused or held, as partial errors", text(res))
		}
		sent := s.fake.Stats().Requests
		done := make(chan *mcp.CallToolResult, 1)
		go func() { done <- s.call(t, "read_card_with_retry", map[string]any{"card_id": "101"}, nil) }()
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := s.fake.Stats().Requests; n != sent {
			t.Fatalf("the second call sent %d requests within the first call's pause of a minute, want none", n-sent)
		}
		time.Sleep(time.Second + ratewise.DefaultPauseSpread)
		synctest.Wait()
		if n := s.fake.Stats().Requests; n == sent {
			t.Error("the second call sent nothing once the pause was over")
		}
		if res := <-done; res.IsError {
			t.Errorf("second call: %s", text(res))
		}
	})
}

func repeat(f kanbanizetest.Fault, n int) []kanbanizetest.Fault {
	out := make([]kanbanizetest.Fault, n)
	for i := range out {
		out[i] = f
	}
	return out
}
