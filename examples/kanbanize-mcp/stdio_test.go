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
	bin := buildServer(t)
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey,
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointComments: {kanbanizetest.Fault503}}})
	defer fake.Close()
	url := fake.Start()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KANBANIZE_BASE_URL="+url, "KANBANIZE_API_KEY="+secretKey, "KANBANIZE_PLAN=standard",
		"KANBANIZE_RETRY_INITIAL_DELAY=10ms")
	var logs syncBuffer
	cmd.Stderr = &logs
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to the server: %v\n%s", err, logs.String())
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 3 {
		t.Fatalf("tools/list = %v, %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_card_with_retry", Arguments: map[string]any{"card_id": "104"}})
	if err != nil || res.IsError {
		t.Fatalf("read_card_with_retry = %+v, %v", res, err)
	}
	var env kanbanize.Envelope
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil || env.Attempts["comments"] != 2 || len(env.Data.Comments) != 4 || env.PartialError != nil {
		t.Errorf("envelope = %s, %v; want card 104 whole, its comments on the second try", b, err)
	}
	if err := cs.Close(); err != nil {
		t.Logf("closing: %v", err)
	}
	out := logs.String() + string(b)
	if strings.Contains(out, secretKey) {
		t.Errorf("the API key appears in the output:\n%s", out)
	}
	var sawStart bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		sawStart = sawStart || rec["event"] == "start"
	}
	if !sawStart {
		t.Errorf("no start event in the logs:\n%s", logs.String())
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
