package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nginxAPIs are nginx's limit_req in its two forms, on loopback only.
func nginxAPIs() []API {
	const refusal = "429, nginx's HTML error page (<title>429 Too Many Requests</title>), no Retry-After nor any rate-limit header"
	return []API{
		{
			Name:     "nginx limit_req nodelay",
			Model:    NginxNoDelay,
			Setup:    "limit_req_zone $binary_remote_addr rate=Rr/s; limit_req burst=B nodelay; limit_req_status 429; a static file \"ok\"",
			Refusal:  refusal,
			Loopback: func(s Scenario) (Server, error) { return startNginx(s, true) },
		},
		{
			Name:     "nginx limit_req queued",
			Model:    NginxQueued,
			Setup:    "limit_req_zone $binary_remote_addr rate=Rr/s; limit_req burst=B (the excess waits in nginx); limit_req_status 429; a static file \"ok\"",
			Refusal:  refusal,
			Loopback: func(s Scenario) (Server, error) { return startNginx(s, false) },
		},
	}
}

var nginxFound struct {
	once sync.Once
	path string
	err  error
}

// Nginx returns the path of the nginx binary, installing Debian's
// nginx-light with apt-get (through sudo when not root) the first time
// it is asked for and missing. Its error says why nginx cannot be had.
func Nginx() (string, error) {
	nginxFound.once.Do(func() {
		if nginxFound.path = lookNginx(); nginxFound.path != "" {
			return
		}
		if err := installNginx(); err != nil {
			nginxFound.err = fmt.Errorf("nginx is not installed, and installing it failed: %w", err)
			return
		}
		if nginxFound.path = lookNginx(); nginxFound.path == "" {
			nginxFound.err = errors.New("nginx-light was installed, but no nginx binary is on PATH or in /usr/sbin")
		}
	})
	return nginxFound.path, nginxFound.err
}

// lookNginx returns nginx's path, or "". /usr/sbin is often not on the
// PATH of a user who is not root.
func lookNginx() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return ""
}

// installNginx runs apt-get update and apt-get install nginx-light,
// through sudo -n (which fails rather than ask for a password) when not
// root.
func installNginx() error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("no apt-get to install it with; install nginx by hand")
	}
	var prefix []string
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return errors.New("not root and no sudo to run apt-get with; install nginx by hand")
		}
		prefix = []string{"sudo", "-n"}
	}
	for _, args := range [][]string{
		{"apt-get", "update", "-qq"},
		{"apt-get", "install", "-y", "-qq", "--no-install-recommends", "nginx-light"},
	} {
		args = append(prefix, args...)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, lastLines(out, 5))
		}
	}
	return nil
}

// lastLines returns the last n lines of out, trimmed.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// nginxConfig is the whole configuration: one worker, every path in the
// server's own directory, one location limited by limit_req that serves
// the static file "items".
const nginxConfig = `# Written by the goodput bench; removed when the server stops.
%[1]s
worker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
lock_file %[2]s/nginx.lock;
error_log %[2]s/error.log warn;
events { worker_connections 1024; }
http {
	log_format status '$status';
	access_log %[2]s/access.log status;
	client_body_temp_path %[2]s/tmp/body;
	proxy_temp_path %[2]s/tmp/proxy;
	fastcgi_temp_path %[2]s/tmp/fastcgi;
	uwsgi_temp_path %[2]s/tmp/uwsgi;
	scgi_temp_path %[2]s/tmp/scgi;
	default_type text/plain;
	limit_req_zone $binary_remote_addr zone=api:1m rate=%[3]s;
	limit_req_status 429;
	server {
		listen 127.0.0.1:%[4]d;
		root %[2]s/www;
		location / {
			limit_req zone=api burst=%[5]d%[6]s;
		}
	}
}
`

// nginxServer is nginx running on 127.0.0.1 from a configuration in a
// temporary directory.
type nginxServer struct {
	dir       string
	url       string
	cmd       *exec.Cmd
	exited    chan struct{}
	err       error // why it exited, once exited is closed
	transport *http.Transport
}

// startNginx starts nginx limiting to s's bucket, with nodelay or
// queueing the excess, on a free port.
func startNginx(s Scenario, nodelay bool) (Server, error) {
	path, err := Nginx()
	if err != nil {
		return nil, err
	}
	// The port is free when asked for; another process may take it before
	// nginx does, so try again a few times.
	for range 3 {
		var srv *nginxServer
		if srv, err = launchNginx(path, s, nodelay); err == nil {
			return srv, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, err
}

func launchNginx(path string, s Scenario, nodelay bool) (*nginxServer, error) {
	dir, err := os.MkdirTemp("", "bench-nginx-")
	if err != nil {
		return nil, err
	}
	srv := &nginxServer{dir: dir, exited: make(chan struct{}), transport: loopbackTransport(s.Workers)}
	if err := srv.start(path, s, nodelay); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

func (n *nginxServer) start(path string, s Scenario, nodelay bool) error {
	// A root master runs its worker as www-data, as Debian's configuration
	// does: the worker must be able to read the directory.
	user := ""
	if os.Geteuid() == 0 {
		user = "user www-data;"
	}
	if err := os.Chmod(n.dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"www", "tmp"} {
		if err := os.Mkdir(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(n.dir, "www", "items"), []byte("ok"), 0o644); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	delay := ""
	if nodelay {
		delay = " nodelay"
	}
	conf := fmt.Sprintf(nginxConfig, user, n.dir, nginxRate(s.Rate), port, s.Burst, delay)
	confPath := filepath.Join(n.dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return err
	}
	n.cmd = exec.Command(path, "-p", n.dir+"/", "-c", confPath, "-e", filepath.Join(n.dir, "error.log"))
	if err := n.cmd.Start(); err != nil {
		return err
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.exited)
	}()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	n.url = "http://" + addr
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-n.exited:
			return fmt.Errorf("nginx exited (%v): %s", n.err, n.errorLog())
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("nginx did not listen on %s within 10s: %s", addr, n.errorLog())
}

// nginxRate writes a rate as nginx reads it: requests a second, or a
// minute when not whole.
func nginxRate(perSecond float64) string {
	if perSecond == math.Trunc(perSecond) {
		return fmt.Sprintf("%dr/s", int(perSecond))
	}
	return fmt.Sprintf("%dr/m", int(math.Round(perSecond*60)))
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *nginxServer) errorLog() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return lastLines(b, 3)
}

// URL returns the server's base URL.
func (n *nginxServer) URL() string { return n.url }

// Transport returns the transport to reach it.
func (n *nginxServer) Transport() http.RoundTripper { return n.transport }

// Stats counts the lines of the access log, a status each. nginx logs a
// request just after it has sent the answer, so the count is read again
// until it holds for 20ms.
func (n *nginxServer) Stats() (received, refused int) {
	received, refused = n.readLog()
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		r, f := n.readLog()
		if r == received && f == refused {
			break
		}
		received, refused = r, f
	}
	return received, refused
}

func (n *nginxServer) readLog() (received, refused int) {
	b, err := os.ReadFile(filepath.Join(n.dir, "access.log"))
	if err != nil {
		return 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		received++
		if sc.Text() == "429" {
			refused++
		}
	}
	return received, refused
}

// Close stops nginx (a fast shutdown, then a kill after 5s) and removes
// its directory.
func (n *nginxServer) Close() {
	n.transport.CloseIdleConnections()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(5 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
	_ = os.RemoveAll(n.dir)
}
