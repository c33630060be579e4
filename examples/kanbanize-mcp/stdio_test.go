package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// buildServer builds the real binary, once for all the tests.
func buildServer(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kanbanize-mcp")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "kanbanize-mcp")
		if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

func TestBinaryOverStdio(t *testing.T) {
	// The built server, driven by the SDK's client over stdio against a
	// fake API, with the retry defaults from its environment: 3 attempts,
	// a first backoff of 5ms. The first read meets a refused API: the
	// comments are refused twice and read on the third attempt, the
	// subtasks refused on all three (kanbanize-rate-limit-plan.md §6, the
	// partial envelope; §8, the log lines). Refusals name no Retry-After,
	// so the backoffs are the configured milliseconds. The plan told is a
	// custom one of 6000 a minute: refused under it, the key learns a pace
	// below it, which stays quick (under the standard plan's 30 a minute,
	// five refusals would space the next requests seconds apart).
	bin := buildServer(t)
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey, RetryAfter: kanbanizetest.RetryAfterNone,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
			kanbanizetest.EndpointComments: repeat(kanbanizetest.Fault429, 2),
			kanbanizetest.EndpointSubtasks: repeat(kanbanizetest.Fault429, 3),
		}})
	defer fake.Close()
	url := fake.Start()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KANBANIZE_BASE_URL="+url, "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_PLAN=6000/100000",
		"KANBANIZE_RETRY_MAX_ATTEMPTS=3", "KANBANIZE_RETRY_INITIAL_DELAY=5ms", "KANBANIZE_RETRY_MAX_DELAY=20ms")
	var logs syncBuffer
	cmd.Stderr = &logs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var progress []*mcp.ProgressNotificationParams
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params)
		},
	})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to the server: %v\n%s", err, logs.String())
	}
	schemas := outputSchemas(t, cs)
	if len(schemas) != 3 {
		t.Fatalf("%d tools with output schemas, want read_card, read_card_with_retry and get_throttle_stats", len(schemas))
	}
	var results []string // every result, to look for the key
	call := func(tool string, args any, token any) *mcp.CallToolResult {
		t.Helper()
		params := &mcp.CallToolParams{Name: tool, Arguments: args}
		if token != nil {
			params.SetProgressToken(token)
		}
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tool, err, logs.String())
		}
		b, _ := json.Marshal(res)
		results = append(results, string(b))
		checkOutput(t, schemas, tool, res)
		return res
	}

	res := call("read_card_with_retry", map[string]any{"card_id": "104"}, "stdio-1")
	var env kanbanize.Envelope
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	fx, _ := fake.Card(104)
	switch {
	case env.CardID != "104" || env.Data.Title != fx.Card.Title:
		t.Errorf("envelope = %s, want card 104, %q", b, fx.Card.Title)
	case !env.Completed["card"] || !env.Completed["comments"] || env.Completed["subtasks"]:
		t.Errorf("completed = %v, want the card and comments, not the subtasks", env.Completed)
	case env.Attempts["card"] != 1 || env.Attempts["comments"] != 3 || env.Attempts["subtasks"] != 3:
		t.Errorf("attempts = %v, want card 1, comments 3 (two refusals), subtasks 3 (max_attempts, all refused)", env.Attempts)
	case len(env.PartialError) != 1 || env.PartialError["subtasks"] != "max retries exceeded (429)":
		t.Errorf("partial_error = %v, want the subtasks' \"max retries exceeded (429)\" only", env.PartialError)
	case len(env.Data.Comments) != len(fx.Comments) || len(fx.Comments) == 0 || len(env.Data.Subtasks) != 0:
		t.Errorf("data has %d comments and %d subtasks, want all %d comments and no subtasks", len(env.Data.Comments), len(env.Data.Subtasks), len(fx.Comments))
	case env.RateLimitHits != 5 || env.WaitSeconds <= 0:
		t.Errorf("rate_limit_hits %d, wait_seconds %v; want 5 and some wait", env.RateLimitHits, env.WaitSeconds)
	}

	// The script is spent: card_id as a number reads whole, in both tools.
	res = call("read_card_with_retry", map[string]any{"card_id": 104}, nil)
	if !strings.Contains(text(res), `"attempts":{"card":1,"comments":1,"subtasks":1},"card_id":"104"`) || strings.Contains(text(res), "partial_error") {
		t.Errorf("read_card_with_retry with card_id 104 = %s, want it whole at the first attempts", text(res))
	}
	res = call("read_card", map[string]any{"card_id": 103}, nil)
	var d kanbanize.CardDetails
	b, _ = json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &d); err != nil || d.Card.CardID != 103 {
		t.Errorf("read_card with card_id 103 = %s, %v", b, err)
	}
	res = call("get_throttle_stats", map[string]any{}, nil)
	for _, want := range []string{`"rate_limit_hits":5,`, `"retries":4,`, `"retries_by_reason":{"429":4}`} {
		if !strings.Contains(text(res), want) {
			t.Errorf("get_throttle_stats = %s, lacks %s", text(res), want)
		}
	}
	if err := cs.Close(); err != nil {
		t.Logf("closing: %v", err)
	}

	// The plan's §8 lines, as JSON on stderr: each retry, the comments
	// read after two, and the subtasks given up.
	var retries, successes, partials []map[string]any
	var sawStart bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		switch rec["event"] {
		case "start":
			sawStart = true
		case "rate_retry":
			retries = append(retries, rec)
		case "rate_success":
			successes = append(successes, rec)
		case "rate_partial":
			partials = append(partials, rec)
		}
	}
	if !sawStart {
		t.Errorf("no start event in the logs:\n%s", logs.String())
	}
	count := func(recs []map[string]any, endpoint string) int {
		n := 0
		for _, r := range recs {
			if r["endpoint"] == endpoint {
				n++
			}
		}
		return n
	}
	if n, m := count(retries, "comments"), count(retries, "subtasks"); n != 2 || m != 2 || len(retries) != 4 {
		t.Errorf("rate_retry lines: %d for the comments, %d for the subtasks, %d in all; want 2, 2 and 4:\n%s", n, m, len(retries), logs.String())
	}
	for _, r := range retries {
		if r["reason"] != "429" || r["max"] != 3.0 || r["level"] != "INFO" {
			t.Errorf("rate_retry line %v, want reason 429, max 3, at INFO", r)
		}
	}
	if i := slices.IndexFunc(successes, func(r map[string]any) bool { return r["endpoint"] == "comments" }); i < 0 || successes[i]["attempts"] != 3.0 || successes[i]["status"] != 200.0 {
		t.Errorf("rate_success lines %v, want the comments' after 3 attempts, status 200", successes)
	}
	if len(partials) != 1 || partials[0]["endpoint"] != "subtasks" || partials[0]["error"] != "max retries exceeded (429)" ||
		partials[0]["attempts"] != 3.0 || partials[0]["card_id"] != "104" || partials[0]["level"] != "WARN" {
		t.Errorf("rate_partial lines %v, want one for the subtasks of card 104 after 3 attempts, at WARN", partials)
	}

	// Progress came, if it came in time, for the first call only: its
	// waits are milliseconds, and what is still queued when a call ends is
	// dropped, not sent after its result.
	mu.Lock()
	for _, p := range progress {
		if p.ProgressToken != "stdio-1" || !strings.HasPrefix(p.Message, "waiting ") || !strings.Contains(p.Message, "/3)") {
			t.Errorf("progress %+v, want token stdio-1 and a wait of attempt n/3", p)
		}
	}
	mu.Unlock()

	if out := logs.String() + strings.Join(results, "\n"); strings.Contains(out, secretKey) {
		t.Errorf("the API key appears in the output:\n%s", out)
	}
}

func TestBinaryStopsOnBadConfig(t *testing.T) {
	bin := buildServer(t)
	cmd := exec.Command(bin)
	cmd.Env = []string{"KANBANIZE_SUBDOMAIN=acme", "KANBANIZE_RETRY_MAX_DELAY=soon"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit = %v, want status 2", err)
	}
	for _, want := range []string{"KANBANIZE_API_KEY is not set", `KANBANIZE_RETRY_MAX_DELAY is "soon"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q lacks %q", stderr.String(), want)
		}
	}
}
