package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// internal/redistest starts a redis-server too, but only for a test (it
// takes a testing.TB): the fleet command needs one outside any test.

var redisFound struct {
	once sync.Once
	path string
	err  error
}

// RedisServerPath returns the path of redis-server, installing Debian's
// redis-server with apt-get (through sudo when not root) the first time
// it is asked for and missing, as [Nginx] does nginx.
func RedisServerPath() (string, error) {
	redisFound.once.Do(func() {
		if redisFound.path, redisFound.err = exec.LookPath("redis-server"); redisFound.err == nil {
			return
		}
		if err := aptInstall("redis-server", "redis-server"); err != nil {
			redisFound.err = fmt.Errorf("redis-server is not installed, and installing it failed: %w", err)
			return
		}
		if redisFound.path, redisFound.err = exec.LookPath("redis-server"); redisFound.err != nil {
			redisFound.err = errors.New("redis-server was installed, but is not on PATH")
		}
	})
	return redisFound.path, redisFound.err
}

// RedisServer is a redis-server this process started on 127.0.0.1, with
// persistence off: the Redis the replicas of a fleet share.
type RedisServer struct {
	// Addr is its host:port.
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error        // why it exited, once exited is closed
	out    bytes.Buffer // its output, to read once exited is closed
}

// StartRedis starts a redis-server on a free port of 127.0.0.1, and
// returns once it answers PING. Close stops it.
func StartRedis() (*RedisServer, error) {
	path, err := RedisServerPath()
	if err != nil {
		return nil, err
	}
	// The port is free when asked for; another process may take it before
	// redis-server does, so try again a few times.
	for range 3 {
		var r *RedisServer
		if r, err = launchRedis(path); err == nil {
			return r, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, err
}

func launchRedis(path string) (*RedisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), exited: make(chan struct{})}
	r.cmd = exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "yes", "--loglevel", "warning")
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	go func() {
		r.err = r.cmd.Wait()
		close(r.exited)
	}()
	client := redisClient(r.Addr)
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		if err == nil {
			return r, nil
		}
		select {
		case <-r.exited:
			return nil, fmt.Errorf("redis-server exited (%v): %s", r.err, lastLines(r.out.Bytes(), 3))
		default:
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within 10s: %w", r.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close stops the server; its data is lost.
func (r *RedisServer) Close() {
	_ = r.cmd.Process.Kill()
	<-r.exited
}

// redisClient is a client of the Redis at addr, built as the store's
// users are told to: with ContextTimeoutEnabled, so that the store's
// timeout ends a call to a Redis that does not answer.
func redisClient(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
}
