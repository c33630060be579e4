package redistest

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of three masters, no replicas, the test
// started on 127.0.0.1: each master a redis-server of its own, the slots
// shared among them by redis-cli.
type Cluster struct {
	Addrs   []string
	servers []*Server
}

// StartCluster starts a Redis Cluster of three masters on free ports of
// 127.0.0.1 (each with its cluster bus on its port + 10000), and stops it
// when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Fatalf("redis-cli is not installed (it comes with redis-server; `make test` installs it): %v", err)
	}
	dir := t.TempDir()
	c := &Cluster{}
	for range 3 {
		port := freeClusterPort(t)
		s := &Server{t: t, port: port, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			extra: []string{"--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
				"--cluster-config-file", filepath.Join(dir, "nodes-"+strconv.Itoa(port)+".conf"), "--dir", dir}}
		s.Start()
		t.Cleanup(s.Stop)
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every master must agree that the cluster is up before a client
	// asks it anything.
	deadline := time.Now().Add(15 * time.Second)
	for _, s := range c.servers {
		client := s.Client()
		for {
			info, err := client.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = client.Close()
				t.Fatalf("the cluster did not come up on %s: %v %q", s.Addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = client.Close()
	}
	return c
}

// Client returns a cluster client of the cluster, configured as ClientOf
// configures one of a single server.
func (c *Cluster) Client() *goredis.ClusterClient {
	return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs, ContextTimeoutEnabled: true, MaxRetries: -1})
}

// freeClusterPort is a free port whose cluster bus port (+10000) is free
// too.
func freeClusterPort(t testing.TB) int {
	t.Helper()
	for range 50 {
		port := freePort(t)
		if port+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port
	}
	t.Fatal("no free port with a free cluster bus port")
	return 0
}
