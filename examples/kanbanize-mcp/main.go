// Command kanbanize-mcp is an MCP server, over stdio or over Streamable
// HTTP, that reads Kanbanize cards for a model: read_card, today's three requests with no retry,
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
//	KANBANIZE_REDIS_URL                         optional: redis://host:6379/0, to share the account's pace,
//	                                            pauses and breaker with the other replicas of the server
//	KANBANIZE_TIME_SCALE                        optional: run a told plan's windows this many times faster,
//	                                            for demos and tests against a fake API on a faster clock
//
// With -http 127.0.0.1:8080 it serves MCP's Streamable HTTP transport at
// /mcp instead of stdio, and /healthz; every session shares the one
// client, so the account's limits hold across all agents. Its own door:
//
//	KANBANIZE_MCP_TOKEN           the bearer token clients must send; required when -http listens
//	                              beyond loopback; without it a request gets 401, never a tool call
//	KANBANIZE_MCP_RATE            requests a second a client may make (5), and
//	KANBANIZE_MCP_BURST           in a burst (20): past them it gets 429 with Retry-After and the
//	                              RateLimit fields, before any Kanbanize quota is spent
//	KANBANIZE_MCP_LIMIT_BY        ip (the default) or session: whom those limits count
//	KANBANIZE_MCP_SHUTDOWN_GRACE  on SIGINT or SIGTERM, how long calls in flight get to finish (10s)
//	                              before their contexts end and they return what they read
//
// Both read tools take card_id as a string or a number, and every tool
// declares the schema of what it returns. A read_card_with_retry call
// with a progress token is told of each wait in notifications/progress,
// sent beside the wait, never holding it back; those a slow client cannot
// take in time are dropped.
//
// Over stdio, stdout carries the protocol; logs go to stderr as JSON lines: the
// client's retries, waits, requests done after a retry and partial reads
// (event=rate_retry, rate_wait, rate_success, rate_giveup, rate_partial)
// and the tools' outcomes (event=tool_done for each read_card_with_retry
// call, tool_error for each read that failed).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	rwredis "github.com/ratewise/ratewise/redis"
)

func main() {
	httpAddr := flag.String("http", "", "serve MCP's Streamable HTTP transport on this address (such as 127.0.0.1:8080) instead of stdio")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	fail := func(code int, err error) {
		fmt.Fprintln(os.Stderr, "kanbanize-mcp:", err)
		os.Exit(code)
	}
	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		fail(2, err)
	}
	var httpCfg httpConfig
	if *httpAddr != "" {
		if httpCfg, err = httpConfigFromEnv(os.Getenv, *httpAddr); err != nil {
			fail(2, err)
		}
	}
	opts, err := clientOptions(cfg, os.Getenv, log)
	if err != nil {
		fail(2, err)
	}
	client, err := kanbanize.NewClient(cfg.account, cfg.apiKey, opts...)
	if err != nil {
		fail(2, fmt.Errorf("KANBANIZE_BASE_URL or KANBANIZE_SUBDOMAIN: %w", err)) // the key was checked before
	}
	tools := newTools(client, cfg.defaults, log)
	calls, endCalls := context.WithCancel(context.Background())
	defer endCalls()
	tools.calls = calls
	server, err := tools.server()
	if err != nil {
		fail(1, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *httpAddr == "" {
		log.Info("serving over stdio", "event", "start", "plan", cfg.plan)
		if err := server.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			log.Error("server stopped", "event", "stop", "error", err)
			os.Exit(1)
		}
		return
	}
	handler, err := httpHandler(server, httpCfg, log)
	if err != nil {
		fail(1, err)
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fail(1, err)
	}
	if httpCfg.token == "" && !loopback(ln.Addr().String()) {
		// The flag's host said loopback, but the name resolved elsewhere.
		fail(2, fmt.Errorf("-http %s listens on %s, beyond loopback: set KANBANIZE_MCP_TOKEN", *httpAddr, ln.Addr()))
	}
	if err := serveHTTP(ctx, ln, handler, httpCfg, endCalls, stop, log); err != nil {
		log.Error("server stopped", "event", "stop", "error", err)
		os.Exit(1)
	}
}

// clientOptions are the Kanbanize client's options: its logger, its plan
// (on a faster clock with KANBANIZE_TIME_SCALE), and with
// KANBANIZE_REDIS_URL a store in Redis that the replicas share.
func clientOptions(cfg config, getenv func(string) string, log *slog.Logger) ([]kanbanize.Option, error) {
	opts := []kanbanize.Option{kanbanize.WithLogger(log)} // the client's retries, waits and partial reads
	scale := 1.0
	if v := strings.TrimSpace(getenv("KANBANIZE_TIME_SCALE")); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || s <= 0 {
			return nil, fmt.Errorf("KANBANIZE_TIME_SCALE is %q: want a number above 0", v)
		}
		scale = s
	}
	switch {
	case cfg.plan == "":
	case scale == 1 || cfg.plan == kanbanize.PlanAuto:
		opts = append(opts, kanbanize.WithPlan(cfg.plan))
	default:
		limits, err := kanbanize.PlanLimits(cfg.plan)
		if err != nil {
			return nil, err
		}
		for _, l := range limits {
			l.Rate = rate.Limit(float64(l.Rate) * scale)
			opts = append(opts, kanbanize.WithTransportOptions(ratewise.WithLimit(l)))
		}
	}
	if v := strings.TrimSpace(getenv("KANBANIZE_REDIS_URL")); v != "" {
		ropts, err := goredis.ParseURL(v)
		if err != nil {
			return nil, fmt.Errorf("KANBANIZE_REDIS_URL is not a redis:// or rediss:// URL") // its error may quote a password
		}
		ropts.ContextTimeoutEnabled = true // the store's timeout ends a call to a Redis that does not answer
		store := rwredis.New(goredis.NewClient(ropts), rwredis.Options{Prefix: "kanbanize-mcp:", Logger: log})
		opts = append(opts, kanbanize.WithTransportOptions(ratewise.WithStore(store)))
	}
	return opts, nil
}
