package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
)

// The tools' descriptions, as MCP clients show them to a model.
const (
	readCardDescription = "Fetches a card and its comments and subtasks, one request after the other, with no retry: " +
		"fails at the first error, a rate limit included (it still waits out a pause the API asked for, up to two minutes)."
	readCardWithRetryDescription = "Fetches a card and its comments and subtasks using exponential full-jitter backoff " +
		"that honours Retry-After. Returns an envelope with attempts, wait time and partial errors."
	throttleStatsDescription = "Reports what the server's rate-limit-aware client has done since it started: requests, " +
		"attempts, retries, 429s, waits by kind, calls given up by reason, the last error, and each API key's circuit breaker; " +
		"and what holds calls back now: the plan's limits (told, or read from the API) and their tokens, the pace learned " +
		"from refusals, a pause the API asked for, and the breaker with its cause."
)

// readCardArgs are read_card's arguments.
type readCardArgs struct {
	CardID cardRef `json:"card_id" jsonschema:"the card's number (345) or URL (https://acme.kanbanize.com/ctrl_board/12/cards/345/details/)"`
}

// readCardWithRetryArgs are read_card_with_retry's arguments. Optional
// ones are pointers: absent, the server's defaults apply (the schema
// shows them).
type readCardWithRetryArgs struct {
	CardID            cardRef  `json:"card_id" jsonschema:"the card's number (345) or URL (https://acme.kanbanize.com/ctrl_board/12/cards/345/details/)"`
	MaxAttempts       *int     `json:"max_attempts,omitempty" jsonschema:"attempts per endpoint, the first included"`
	InitialDelayMs    *int     `json:"initial_delay_ms,omitempty" jsonschema:"the first backoff, in milliseconds"`
	MaxDelayMs        *int     `json:"max_delay_ms,omitempty" jsonschema:"the longest computed backoff, in milliseconds; a server's Retry-After is honoured beyond it"`
	Multiplier        *float64 `json:"multiplier,omitempty" jsonschema:"how much the backoff grows from one retry to the next"`
	FullJitter        *bool    `json:"full_jitter,omitempty" jsonschema:"draw each backoff in [0, delay]; false draws it in delay ± 20%"`
	RespectRetryAfter *bool    `json:"respect_retry_after,omitempty" jsonschema:"wait at least what the server asks in Retry-After"`
	TotalWaitCapMs    *int     `json:"total_wait_cap_ms,omitempty" jsonschema:"the most time the call may spend waiting, all endpoints together, in milliseconds"`
	FailOnPartial     *bool    `json:"fail_on_partial,omitempty" jsonschema:"fail the call when the comments or subtasks cannot be read, instead of returning what was read"`
}

// options are the retry options of a call: the defaults, then the
// arguments given.
func (a readCardWithRetryArgs) options(defaults kanbanize.RetryOptions) kanbanize.RetryOptions {
	o := defaults
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set(&o.MaxAttempts, a.MaxAttempts)
	set(&o.InitialDelayMs, a.InitialDelayMs)
	set(&o.MaxDelayMs, a.MaxDelayMs)
	set(&o.TotalWaitCapMs, a.TotalWaitCapMs)
	if a.Multiplier != nil {
		o.Multiplier = *a.Multiplier
	}
	if a.FullJitter != nil {
		o.FullJitter = a.FullJitter
	}
	if a.RespectRetryAfter != nil {
		o.RespectRetryAfter = a.RespectRetryAfter
	}
	if a.FailOnPartial != nil {
		o.FailOnPartial = *a.FailOnPartial
	}
	return o
}

// tools serves the tools with one client, and so one ratewise transport:
// every call shares its limits, cooldown and breaker.
type tools struct {
	client   *kanbanize.Client
	defaults kanbanize.RetryOptions // with every default filled in
	log      *slog.Logger
	notify   notifyFunc // sends a progress notification
	// calls, when set, ends when the server stops taking calls: the
	// calls in flight then end too, each with what it read.
	calls context.Context
}

// untilStopped is ctx, ended also when the server stops taking calls.
func (t *tools) untilStopped(ctx context.Context) (context.Context, func()) {
	if t.calls == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.calls, cancel)
	return ctx, func() { stop(); cancel() }
}

// newServer returns the MCP server with its three tools.
func newServer(client *kanbanize.Client, defaults kanbanize.RetryOptions, log *slog.Logger) (*mcp.Server, error) {
	return newTools(client, defaults, log).server()
}

// newTools returns the tools over client, sending progress notifications
// through their session.
func newTools(client *kanbanize.Client, defaults kanbanize.RetryOptions, log *slog.Logger) *tools {
	notify := func(ctx context.Context, ss *mcp.ServerSession, p *mcp.ProgressNotificationParams) error {
		return ss.NotifyProgress(ctx, p)
	}
	return &tools{client: client, defaults: defaults.WithDefaults(), log: log, notify: notify}
}

// server returns the MCP server of t's tools, each with its input and
// output schema.
func (t *tools) server() (*mcp.Server, error) {
	readIn, err := inputSchema[readCardArgs]()
	if err != nil {
		return nil, err
	}
	retryIn, err := t.retrySchema()
	if err != nil {
		return nil, err
	}
	var outs [3]*jsonschema.Schema
	for i, text := range []string{readCardOutput, readCardWithRetryOutput, throttleStatsOutput} {
		if outs[i], err = outputSchema(text); err != nil {
			return nil, err
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "kanbanize-mcp", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read_card", Description: readCardDescription, InputSchema: readIn, OutputSchema: outs[0]}, t.readCard)
	mcp.AddTool(s, &mcp.Tool{Name: "read_card_with_retry", Description: readCardWithRetryDescription,
		InputSchema: retryIn, OutputSchema: outs[1]}, t.readCardWithRetry)
	mcp.AddTool(s, &mcp.Tool{Name: "get_throttle_stats", Description: throttleStatsDescription, OutputSchema: outs[2]}, t.throttleStats)
	return s, nil
}

// throttleStats is get_throttle_stats's answer: what the server's one
// ratewise transport has done, and what holds it back now.
type throttleStats struct {
	Stats    ratewise.Stats           `json:"stats"`
	Breakers []ratewise.BreakerStatus `json:"breakers"`
	// Limits is what holds the account's calls back now: the plan's
	// limits (told, or read from the API under auto), the pace learned
	// from refusals, a pause and the breaker, with their state.
	Limits ratewise.KeyStatus `json:"limits"`
}

func (t *tools) throttleStats(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, throttleStats, error) {
	rw := t.client.Transport()
	breakers := rw.BreakerStatuses()
	if breakers == nil {
		breakers = []ratewise.BreakerStatus{}
	}
	return nil, throttleStats{Stats: rw.Stats(), Breakers: breakers, Limits: t.client.KeyStatus()}, nil
}

// retrySchema is the inferred schema of read_card_with_retry's arguments,
// with each optional one's default: the server's.
func (t *tools) retrySchema() (*jsonschema.Schema, error) {
	s, err := inputSchema[readCardWithRetryArgs]()
	if err != nil {
		return nil, err
	}
	d := t.defaults
	defaults := map[string]any{
		"max_attempts": d.MaxAttempts, "initial_delay_ms": d.InitialDelayMs, "max_delay_ms": d.MaxDelayMs,
		"multiplier": d.Multiplier, "full_jitter": *d.FullJitter, "respect_retry_after": *d.RespectRetryAfter,
		"total_wait_cap_ms": d.TotalWaitCapMs, "fail_on_partial": d.FailOnPartial,
	}
	for name, v := range defaults {
		prop, ok := s.Properties[name]
		if !ok {
			return nil, fmt.Errorf("the schema has no %s", name)
		}
		raw, _ := json.Marshal(v)
		prop.Default = raw
		prop.Description += fmt.Sprintf(" (default %s)", raw)
	}
	return s, nil
}

func (t *tools) readCard(ctx context.Context, _ *mcp.CallToolRequest, args readCardArgs) (*mcp.CallToolResult, *kanbanize.CardDetails, error) {
	ctx, done := t.untilStopped(ctx)
	defer done()
	d, err := t.client.ReadCard(ctx, string(args.CardID))
	if err != nil {
		t.log.Info("read_card failed", "event", "tool_error", "tool", "read_card", "error", err)
		return nil, nil, err
	}
	return nil, d, nil
}

func (t *tools) readCardWithRetry(ctx context.Context, req *mcp.CallToolRequest, args readCardWithRetryArgs) (*mcp.CallToolResult, *kanbanize.Envelope, error) {
	ctx, done := t.untilStopped(ctx)
	defer done()
	opts := args.options(t.defaults)
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	// The client's transport logs each retry, wait and request done
	// (event=rate_retry, rate_wait, rate_success) and the client each
	// part read without (rate_partial): see kanbanize.WithLogger. A call
	// with a progress token is told of each wait too, by a goroutine of
	// its own: Progress is called as a wait starts, and the wait begins
	// only once it returns.
	if token := req.Params.GetProgressToken(); token != nil {
		p := startProgress(ctx, req.Session, t.notify, token, opts.WithDefaults().MaxAttempts) // max_attempts 0 means the default
		opts.Progress = p.Report
		defer func() {
			if n := p.Stop(); n > 0 {
				t.log.Debug("progress notifications dropped", "event", "progress_dropped", "count", n)
			}
		}()
	}
	env, err := t.client.ReadCardWithRetry(ctx, string(args.CardID), opts)
	if err != nil {
		t.log.Info("read_card_with_retry failed", "event", "tool_error", "tool", "read_card_with_retry", "error", err)
		return nil, nil, err
	}
	t.log.Info("read_card_with_retry done", "event", "tool_done", "tool", "read_card_with_retry", "card_id", env.CardID,
		"attempts", env.Attempts, "wait_ms", int64(env.WaitSeconds*1000), "partial", len(env.PartialError) > 0)
	return nil, env, nil
}
