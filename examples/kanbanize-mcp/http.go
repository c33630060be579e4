package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise/admission"
)

// This file serves the tools over MCP's Streamable HTTP transport: every
// session shares the one server, and so the one Kanbanize client and its
// ratewise transport; the endpoint sits behind a bearer token and the
// admission limiter, both before any tool runs.

// httpConfig is how the HTTP endpoint is served, from the environment.
type httpConfig struct {
	token   string        // KANBANIZE_MCP_TOKEN: required off loopback; never printed
	rate    float64       // KANBANIZE_MCP_RATE: requests a second per client
	burst   int           // KANBANIZE_MCP_BURST
	limitBy string        // KANBANIZE_MCP_LIMIT_BY: "ip" or "session"
	grace   time.Duration // KANBANIZE_MCP_SHUTDOWN_GRACE: how long calls in flight get to finish
}

// The endpoint's defaults: an agent may call a few tools a second, in
// bursts of twenty, and calls in flight get ten seconds at shutdown.
const (
	defaultMCPRate  = 5
	defaultMCPBurst = 20
	defaultGrace    = 10 * time.Second
)

// httpConfigFromEnv reads the endpoint's settings; addr is where it
// listens, for the token rule.
func httpConfigFromEnv(getenv func(string) string, addr string) (httpConfig, error) {
	cfg := httpConfig{token: strings.TrimSpace(getenv("KANBANIZE_MCP_TOKEN")), rate: defaultMCPRate,
		burst: defaultMCPBurst, limitBy: "ip", grace: defaultGrace}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if v := strings.TrimSpace(getenv("KANBANIZE_MCP_RATE")); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			bad("KANBANIZE_MCP_RATE is %q: want requests a second, above 0", v)
		}
		cfg.rate = r
	}
	if v := strings.TrimSpace(getenv("KANBANIZE_MCP_BURST")); v != "" {
		b, err := strconv.Atoi(v)
		if err != nil || b < 1 {
			bad("KANBANIZE_MCP_BURST is %q: want a whole number, 1 or more", v)
		}
		cfg.burst = b
	}
	switch v := strings.TrimSpace(getenv("KANBANIZE_MCP_LIMIT_BY")); v {
	case "", "ip":
	case "session":
		cfg.limitBy = v
	default:
		bad("KANBANIZE_MCP_LIMIT_BY is %q: want ip or session", v)
	}
	if v := strings.TrimSpace(getenv("KANBANIZE_MCP_SHUTDOWN_GRACE")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad("KANBANIZE_MCP_SHUTDOWN_GRACE is %q: want a duration like 10s", v)
		}
		cfg.grace = d
	}
	if cfg.token == "" && !loopback(addr) {
		bad("-http %s listens beyond loopback: set KANBANIZE_MCP_TOKEN, the bearer token its clients must send", addr)
	}
	return cfg, errors.Join(errs...)
}

// loopback reports whether addr's host is a loopback address or
// localhost; an empty host listens everywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpHandler is the endpoint: /mcp behind the token and the admission
// limiter, and /healthz.
func httpHandler(server *mcp.Server, cfg httpConfig, log *slog.Logger) (http.Handler, error) {
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	limit := admission.Limit{Name: "mcp per " + cfg.limitBy, Rate: rate.Limit(cfg.rate), Burst: cfg.burst}
	if cfg.limitBy == "session" {
		limit.Key = bySession
	}
	limited, err := admission.New(mcpHandler, admission.WithLimit(limit), admission.WithLogger(log))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(cfg.token, limited))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return mux, nil
}

// bySession keys a request by its MCP session, or, before it has one (its
// initialize), by its address.
func bySession(r *http.Request) string {
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		return "session " + id
	}
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return "ip " + host
}

// requireToken answers 401 to a request without "Authorization: Bearer
// token", before anything else sees it; an empty token lets all through.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is read ignoring case (RFC 9110); the tokens are
		// compared by their hashes, in constant time and length.
		scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(got))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kanbanize-mcp"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serveHTTP serves handler on ln until ctx ends, then shuts down: calls in
// flight get cfg.grace to finish, then endCalls ends their contexts, and
// each returns what it read so far (read_card_with_retry's partial
// envelope) or its error. stopSignals gives the signals that ended ctx
// back their default, so that a second one ends the process.
func serveHTTP(ctx context.Context, ln net.Listener, handler http.Handler, cfg httpConfig, endCalls, stopSignals func(), log *slog.Logger) error {
	calls, cancelCalls := context.WithCancel(context.Background())
	defer cancelCalls()
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	srv := &http.Server{Handler: endingStreams(streams, handler), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return calls }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving MCP over Streamable HTTP", "event", "start", "addr", ln.Addr().String())
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stopSignals() // a second SIGINT or SIGTERM ends the process at once
	log.Info("shutting down", "event", "shutdown", "grace_ms", cfg.grace.Milliseconds())
	endStreams() // the sessions' open streams carry no call: they end now
	grace, cancel := context.WithTimeout(context.Background(), cfg.grace)
	defer cancel()
	if err := srv.Shutdown(grace); err != nil {
		// Calls still running: end them, and give them a moment to
		// answer with what they have, over requests still open; then end
		// what is left.
		endCalls()
		ended, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := srv.Shutdown(ended); err != nil {
			cancelCalls()
			_ = srv.Close()
		}
	}
	log.Info("stopped", "event", "stop")
	return nil
}

// endingStreams ends the GET requests (a session's stream of server
// messages, which stays open and carries no call) when streams ends, so
// that a shutdown waits only for the calls in flight.
func endingStreams(streams context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(streams, cancel)()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}
