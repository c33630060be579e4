// Package redistest runs a real redis-server for tests of code that shares
// a ratewise transport's state through Redis: on 127.0.0.1, on a free
// port, with persistence off, started by the test and stopped when it
// ends. It fails the test, rather than skip it, when redis-server cannot
// start (`apt-get install redis-server` provides it); a store tested
// against a fake Redis would test the fake.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Server is a redis-server the test started.
type Server struct {
	t    testing.TB
	Addr string
	port int
	cmd  *exec.Cmd
	done chan struct{}
	// extra are arguments beyond the defaults: a cluster's master's.
	extra []string
}

// Start starts a redis-server on a free port of 127.0.0.1 and stops it when
// the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (apt-get install redis-server; `make test` does it): %v", err)
	}
	s := &Server{t: t, port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server again on its port, after Stop.
func (s *Server) Start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"}
	s.cmd = exec.Command("redis-server", append(args, s.extra...)...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
	client := s.Client()
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			s.t.Fatalf("redis-server on %s did not answer: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server, its data lost, frozen or not. It may be called
// more than once.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Client returns a client of the server.
func (s *Server) Client() *goredis.Client { return ClientOf(s.Addr) }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// String returns the server's address.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr) }

// ClientOf returns a client of the server at addr, for a process that did
// not start the server. It is configured as the store's users are told to:
// contexts honoured, go-redis's default timeouts (seconds), so that a test
// of a Redis that does not answer fails unless the store's own timeout
// ends the call; and no retries, so that a Redis stopped fails at once.
func ClientOf(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
}
