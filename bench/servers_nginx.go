package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nginxAPIs are nginx's limit_req in its two forms, and its limit_conn
// in front of a Go application that takes the service time, on loopback
// only.
func nginxAPIs() []API {
	const refusal = "429, nginx's HTML error page (<title>429 Too Many Requests</title>), no Retry-After nor any rate-limit header"
	return []API{
		{
			Name:     "nginx limit_req nodelay",
			Model:    NginxNoDelay,
			Setup:    "limit_req_zone $binary_remote_addr rate=Rr/s; limit_req burst=B nodelay; limit_req_status 429; a static file \"ok\"",
			Refusal:  refusal,
			Loopback: func(s Scenario) (Server, error) { return startNginx(s, limitReq(s, true), nil) },
		},
		{
			Name:     "nginx limit_req queued",
			Model:    NginxQueued,
			Setup:    "limit_req_zone $binary_remote_addr rate=Rr/s; limit_req burst=B (the excess waits in nginx); limit_req_status 429; a static file \"ok\"",
			Refusal:  refusal,
			Loopback: func(s Scenario) (Server, error) { return startNginx(s, limitReq(s, false), nil) },
		},
		{
			Name:  "nginx limit_conn",
			Model: ConcurrencyCap,
			Setup: "limit_conn_zone $binary_remote_addr; limit_conn N; limit_conn_status 429; proxy_pass to a Go application " +
				"on loopback that answers \"ok\" after the service time, over kept-alive connections",
			Refusal:  refusal,
			Loopback: startNginxConn,
		},
	}
}

// nginxSite is what a configuration limits with: directives of the http
// block (zones, upstreams) and of the location every request goes to.
type nginxSite struct {
	http, location string
}

// limitReq is limit_req for the bucket of s, with nodelay or queueing the
// excess, in front of the static file "items".
func limitReq(s Scenario, nodelay bool) nginxSite {
	delay := ""
	if nodelay {
		delay = " nodelay"
	}
	return nginxSite{
		http:     fmt.Sprintf("limit_req_zone $binary_remote_addr zone=api:1m rate=%s;\n\tlimit_req_status 429;", nginxRate(s.Rate)),
		location: fmt.Sprintf("limit_req zone=api burst=%d%s;", s.Burst, delay),
	}
}

// startNginxConn starts the application that takes the service time of s
// on loopback, and nginx's limit_conn in front of it, capping the
// requests in flight at s.Limit.
func startNginxConn(s Scenario) (Server, error) {
	app := httptest.NewServer(serviceHandler(s.Service))
	site := nginxSite{
		http: fmt.Sprintf("limit_conn_zone $binary_remote_addr zone=conn:1m;\n\tlimit_conn_status 429;\n"+
			"\tupstream app {\n\t\tserver %s;\n\t\tkeepalive %d;\n\t}", app.Listener.Addr(), s.Workers),
		location: fmt.Sprintf("limit_conn conn %d;\n\t\t\tproxy_pass http://app;\n\t\t\tproxy_http_version 1.1;\n"+
			"\t\t\tproxy_set_header Connection \"\";", s.Limit),
	}
	srv, err := startNginx(s, site, app)
	if err != nil {
		app.Close()
		return nil, err
	}
	return srv, nil
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

// installNginx installs Debian's nginx-light.
func installNginx() error { return aptInstall("nginx-light", "nginx") }

// aptInstall runs apt-get update and apt-get install pkg, through sudo -n
// (which fails rather than ask for a password) when not root; what names
// the program in the errors that say to install it by hand.
func aptInstall(pkg, what string) error {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("no apt-get to install it with; install %s by hand", what)
	}
	var prefix []string
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("sudo"); err != nil {
			return fmt.Errorf("not root and no sudo to run apt-get with; install %s by hand", what)
		}
		prefix = []string{"sudo", "-n"}
	}
	for _, args := range [][]string{
		{"apt-get", "update", "-qq"},
		{"apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg},
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
// server's own directory, one location limited as a site says (by
// default it serves the static file "items").
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
	%[3]s
	server {
		listen 127.0.0.1:%[4]d;
		root %[2]s/www;
		location / {
			%[5]s
		}
	}
}
`

// nginxServer is nginx running on 127.0.0.1 from a configuration in a
// temporary directory, and the application behind it, if any.
type nginxServer struct {
	dir       string
	url       string
	cmd       *exec.Cmd
	exited    chan struct{}
	err       error // why it exited, once exited is closed
	transport *http.Transport
	app       *httptest.Server // nil when nginx serves a static file
}

// startNginx starts nginx limiting as site says, with app behind it (nil
// for none), on a free port. It closes app only once started: Close does.
func startNginx(s Scenario, site nginxSite, app *httptest.Server) (Server, error) {
	path, err := Nginx()
	if err != nil {
		return nil, err
	}
	// The port is free when asked for; another process may take it before
	// nginx does, so try again a few times.
	for range 3 {
		var srv *nginxServer
		if srv, err = launchNginx(path, s, site); err == nil {
			srv.app = app
			return srv, nil
		}
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, err
}

func launchNginx(path string, s Scenario, site nginxSite) (*nginxServer, error) {
	dir, err := os.MkdirTemp("", "bench-nginx-")
	if err != nil {
		return nil, err
	}
	srv := &nginxServer{dir: dir, exited: make(chan struct{}), transport: loopbackTransport(s.Workers)}
	if err := srv.start(path, site); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

func (n *nginxServer) start(path string, site nginxSite) error {
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
	conf := fmt.Sprintf(nginxConfig, user, n.dir, site.http, port, site.location)
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

// Close stops nginx (a fast shutdown, then a kill after 5s) and the
// application behind it, and removes its directory.
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
	if n.app != nil {
		n.app.Close()
	}
	_ = os.RemoveAll(n.dir)
}
