package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// BenchmarkMCPEndpoint is a tool call over Streamable HTTP on loopback
// (get_throttle_stats, which calls no API), through the endpoint as
// served (the token check and the admission limiter, with limits it never
// reaches) and through the bare MCP handler. Compare with benchstat:
// go test -run '^$' -bench MCPEndpoint -count 8 .
func BenchmarkMCPEndpoint(b *testing.B) {
	fake := kanbanizetest.New(kanbanizetest.Config{APIKey: secretKey})
	defer fake.Close()
	url := fake.Start()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// Each run gets a server of its own, so that what one run leaves (its
	// session) does not slow the next.
	newMCPServer := func(b *testing.B) *mcp.Server {
		client, err := kanbanize.NewClient(url, secretKey)
		if err != nil {
			b.Fatal(err)
		}
		server, err := newServer(client, kanbanize.RetryOptions{}, log)
		if err != nil {
			b.Fatal(err)
		}
		return server
	}
	for _, c := range []struct {
		name    string
		handler func(*mcp.Server) http.Handler
	}{
		{"bare", func(s *mcp.Server) http.Handler {
			mux := http.NewServeMux()
			mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
			return mux
		}},
		{"token+admission", func(s *mcp.Server) http.Handler {
			h, err := httpHandler(s, httpConfig{token: secretToken, rate: 1e9, burst: 1 << 30, limitBy: "ip"}, log)
			if err != nil {
				b.Fatal(err)
			}
			return h
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.handler(newMCPServer(b)))
			defer srv.Close()
			hc := &http.Client{Transport: bearer{secretToken, http.DefaultTransport}}
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
				&mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &mcp.CallToolParams{Name: "get_throttle_stats", Arguments: map[string]any{}}
			for b.Loop() {
				if _, err := cs.CallTool(context.Background(), params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
