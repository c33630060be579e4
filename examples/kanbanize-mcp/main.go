// Command kanbanize-mcp is an MCP server, over stdio, that reads Kanbanize
// cards for a model: read_card, today's three requests with no retry,
// read_card_with_retry, the same read through ratewise, which keeps working
// when the API answers 429 and says what it could not read, and
// get_throttle_stats, what the server's transport has done.
//
// It is configured from the environment:
//
//	KANBANIZE_BASE_URL or KANBANIZE_SUBDOMAIN   the account (https://acme.kanbanize.com, or acme)
//	KANBANIZE_API_KEY                           the API key
//	KANBANIZE_PLAN                              optional: standard, large, extra-large, or a custom plan's limits
//	                                            a minute and an hour like 45/700, to pace under them; unset or
//	                                            auto, the limits the API tells (GET /api/v2/apiLimits), else
//	                                            those learned from its refusals
//	KANBANIZE_RETRY_MAX_ATTEMPTS                read_card_with_retry's defaults: a whole number,
//	KANBANIZE_RETRY_INITIAL_DELAY               and durations like 5s, or whole milliseconds
//	KANBANIZE_RETRY_MAX_DELAY
//	KANBANIZE_RETRY_TOTAL_CAP
//
// Both read tools take card_id as a string or a number, and every tool
// declares the schema of what it returns. A read_card_with_retry call
// with a progress token is told of each wait in notifications/progress,
// sent beside the wait, never holding it back; those a slow client cannot
// take in time are dropped.
//
// Stdout carries the protocol; logs go to stderr as JSON lines: the
// client's retries, waits, requests done after a retry and partial reads
// (event=rate_retry, rate_wait, rate_success, rate_giveup, rate_partial)
// and the tools' outcomes (event=tool_done for each read_card_with_retry
// call, tool_error for each read that failed).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kanbanize-mcp:", err)
		os.Exit(2)
	}
	opts := []kanbanize.Option{kanbanize.WithLogger(log)} // the client's retries, waits and partial reads
	if cfg.plan != "" {
		opts = append(opts, kanbanize.WithPlan(cfg.plan))
	}
	client, err := kanbanize.NewClient(cfg.account, cfg.apiKey, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kanbanize-mcp: KANBANIZE_BASE_URL or KANBANIZE_SUBDOMAIN:", err) // the key was checked before
		os.Exit(2)
	}
	server, err := newServer(client, cfg.defaults, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kanbanize-mcp:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Info("serving over stdio", "event", "start", "plan", cfg.plan)
	if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
		log.Error("server stopped", "event", "stop", "error", err)
		os.Exit(1)
	}
}
