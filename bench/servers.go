package bench

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

// API is a rate-limited server the scenarios run against: ratewisetest's
// fake, a third-party middleware around a handler answering 200 "ok" (in
// the scenario's service time), or nginx.
type API struct {
	// Name names the server.
	Name string
	// Module is the Go module of a third-party server.
	Module string
	// Model is how it counts; a scenario runs against the APIs whose model
	// keeps its kind of limit, and only those.
	Model Model
	// Setup says how the server is configured from a scenario's limit,
	// when that is not plain.
	Setup string
	// Refusal is what the server answers when it refuses: status,
	// headers, body.
	Refusal string
	// RefusalStatus is the status of a refusal, which the server's counts
	// count; zero means 429.
	RefusalStatus int
	// Loopback starts the server for s on 127.0.0.1, on a free port.
	Loopback func(s Scenario) (Server, error)
	// InProcess returns the server for s as a transport that answers in
	// the caller's goroutine, to run inside a testing/synctest bubble; nil
	// for a server that cannot run in fake time.
	InProcess func(s Scenario) (Server, error)
	// ideal, when set, replaces the model's ideal.
	ideal func(s Scenario) time.Duration
}

// Fits reports whether s can run against a: whether a keeps the kind of
// limit s sets.
func (a API) Fits(s Scenario) bool { return a.Model.Kind() == s.Kind() }

// refusalStatus returns the status of a's refusals with the default
// applied.
func (a API) refusalStatus() int {
	if a.RefusalStatus == 0 {
		return http.StatusTooManyRequests
	}
	return a.RefusalStatus
}

// Ideal is the shortest time the calls of s can take against a.
func (a API) Ideal(s Scenario) time.Duration {
	if a.ideal != nil {
		return a.ideal(s)
	}
	return a.Model.Ideal(s)
}

// Title is the server's name and, when the binary knows it (a test
// binary does not), the version of its module.
func (a API) Title() string {
	if v := moduleVersion(a.Module); a.Module != "" && v != "" {
		return a.Name + " " + v
	}
	return a.Name
}

// Describe says how a limits for s: its model, its limit and its setup.
func (a API) Describe(s Scenario) string {
	if a.Setup == "" {
		return fmt.Sprintf("%s, %s", a.Model, s.limit())
	}
	return fmt.Sprintf("%s, %s: %s", a.Model, s.limit(), a.Setup)
}

// APIs are the servers, in the order their tables print.
func APIs() []API {
	return slices.Concat(fakeAPIs(), middlewareAPIs(), nginxAPIs())
}

// fakeAPIs are ratewisetest's models, each with the hints a kind of real
// server gives; their ideal is ratewisetest's Config.Ideal. The fixed
// windows are aligned to the clock: in fake time the run starts as a
// window opens, on loopback anywhere in one, which can make the first
// window short and the run up to a window faster than the ideal. The cap
// and the shedders send no hint at all, as go-chi's Throttle and nginx's
// limit_conn do.
func fakeAPIs() []API {
	bucket := func(s Scenario) ratewisetest.Config { return ratewisetest.Config{Rate: s.Rate, Burst: s.Burst} }
	window := func(m ratewisetest.Model) func(Scenario) ratewisetest.Config {
		return func(s Scenario) ratewisetest.Config {
			return ratewisetest.Config{Model: m, Limit: s.Limit, Window: s.Window}
		}
	}
	with := func(config func(Scenario) ratewisetest.Config, change func(*ratewisetest.Config)) func(Scenario) ratewisetest.Config {
		return func(s Scenario) ratewisetest.Config {
			c := config(s)
			change(&c)
			return c
		}
	}
	capped := func(s Scenario) ratewisetest.Config {
		return ratewisetest.Config{Model: ratewisetest.ConcurrencyCap, Limit: s.Limit, ServiceTime: s.Service}
	}
	shed := func(status int) func(Scenario) ratewisetest.Config {
		return func(s Scenario) ratewisetest.Config {
			return ratewisetest.Config{Model: ratewisetest.LoadShed, Shed: s.Shed, RefusalStatus: status}
		}
	}
	leaky := func(noDelay bool) func(Scenario) ratewisetest.Config {
		return func(s Scenario) ratewisetest.Config {
			return ratewisetest.Config{Model: ratewisetest.LeakyBucket, Rate: s.Rate, Burst: s.Burst, NoDelay: noDelay, HTMLRefusal: true}
		}
	}
	const json = `JSON body {"error":"rate limited"}`
	const html = "an HTML error page (<title>429 Too Many Requests</title>), no Retry-After nor any rate-limit header"
	return []API{
		fakeAPI("ratewisetest, Retry-After only", TokenBucket, "429, Retry-After in whole seconds (at least 1), "+json, bucket),
		fakeAPI("ratewisetest, rate-limit headers", TokenBucket,
			"429, Retry-After, X-RateLimit-Limit/Remaining/Reset (seconds) and the IETF RateLimit-Policy and RateLimit (on every answer), "+json,
			with(bucket, func(c *ratewisetest.Config) { c.PublishHeaders, c.IETFHeaders = true, true })),
		fakeAPI("ratewisetest leaky bucket nodelay, HTML 429", NginxNoDelay, "429, "+html, leaky(true)),
		fakeAPI("ratewisetest leaky bucket queued, HTML 429", NginxQueued, "429, "+html, leaky(false)),
		fakeAPI("ratewisetest fixed window, Unix reset", FixedWindow,
			"429, X-RateLimit-Limit/Remaining and X-RateLimit-Reset as the Unix time of the window's end (on every answer), no Retry-After, "+json,
			with(window(ratewisetest.FixedWindow), func(c *ratewisetest.Config) {
				c.PublishHeaders, c.Reset, c.RetryAfter = true, ratewisetest.ResetUnix, ratewisetest.RetryAfterNone
			})),
		fakeAPI("ratewisetest fixed window, Retry-After", FixedWindow,
			"429, Retry-After: whole seconds to the window's end, "+json, window(ratewisetest.FixedWindow)),
		fakeAPI("ratewisetest first-request window", FixedWindowFromFirst,
			"429, Retry-After: whole seconds to the window's end, "+json, window(ratewisetest.FixedWindowFromFirst)),
		fakeAPI("ratewisetest sliding window, Retry-After the window", SlidingWindow,
			"429, Retry-After: the whole window in seconds, "+json,
			with(window(ratewisetest.SlidingWindow), func(c *ratewisetest.Config) { c.RetryAfter = ratewisetest.RetryAfterWindow })),
		fakeAPI("ratewisetest concurrency cap", ConcurrencyCap, "429 at once, no Retry-After nor any rate-limit header, "+json, capped),
		fakeAPI("ratewisetest load shedder, 429", LoadShed,
			"429, no Retry-After nor any rate-limit header, "+json+"; which requests it refuses is drawn from a seeded stream", shed(http.StatusTooManyRequests)),
		withStatus(fakeAPI("ratewisetest load shedder, 503", LoadShed,
			"503, no Retry-After nor any rate-limit header, "+json+"; which requests it refuses is drawn from a seeded stream", shed(http.StatusServiceUnavailable)),
			http.StatusServiceUnavailable),
	}
}

// withStatus is a with its refusals' status set to status.
func withStatus(a API, status int) API {
	a.RefusalStatus = status
	return a
}

// fakeAPI is ratewisetest's fake configured by config.
func fakeAPI(name string, model Model, refusal string, config func(Scenario) ratewisetest.Config) API {
	return API{
		Name:    name,
		Model:   model,
		Refusal: refusal,
		Loopback: func(s Scenario) (Server, error) {
			return NewLoopback(config(s), s.Workers), nil
		},
		InProcess: func(s Scenario) (Server, error) {
			return NewInProcess(config(s)), nil
		},
		ideal: func(s Scenario) time.Duration { return config(s).Ideal(s.Calls) },
	}
}

// Loopback is ratewisetest's fake server on 127.0.0.1.
type Loopback struct {
	srv       *ratewisetest.Server
	transport *http.Transport
}

// NewLoopback starts the fake server cfg describes, with a transport that
// keeps enough connections for the workers.
func NewLoopback(cfg ratewisetest.Config, workers int) *Loopback {
	srv := ratewisetest.NewServer(cfg)
	return &Loopback{srv: srv, transport: loopbackTransport(workers)}
}

// URL returns the server's base URL.
func (l *Loopback) URL() string { return l.srv.URL }

// Transport returns the transport to reach it.
func (l *Loopback) Transport() http.RoundTripper { return l.transport }

// Stats returns the requests received and refused.
func (l *Loopback) Stats() (int, int) {
	st := l.srv.Stats()
	return st.Received, st.Limited
}

// Close stops the server.
func (l *Loopback) Close() {
	l.transport.CloseIdleConnections()
	l.srv.Close()
}

// InProcess is ratewisetest's fake server as an http.RoundTripper that
// answers in the caller's goroutine (ratewisetest's Bucket): no network,
// so it runs inside a testing/synctest bubble, where a ten-second scenario
// takes no time. It keeps the same limit and headers as the loopback
// server.
type InProcess struct {
	b *ratewisetest.Bucket
}

// NewInProcess returns the in-process fake server cfg describes.
func NewInProcess(cfg ratewisetest.Config) *InProcess {
	return &InProcess{b: ratewisetest.NewBucket(cfg)}
}

// URL returns a base URL the transport answers for.
func (p *InProcess) URL() string { return inProcessURL }

// Transport returns the bucket.
func (p *InProcess) Transport() http.RoundTripper { return p.b }

// Stats returns the requests received and refused.
func (p *InProcess) Stats() (int, int) {
	st := p.b.Stats()
	return st.Received, st.Limited
}

// Close does nothing: there is nothing to stop.
func (p *InProcess) Close() {}

// inProcessURL is the base URL of every in-process server.
const inProcessURL = "http://api.bench.test"

// loopbackTransport is a transport that keeps a connection per worker, and
// as many spare.
func loopbackTransport(workers int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = workers*2, workers*2
	return t
}

// moduleVersion returns the version of the module at path this binary was
// built with, or "" when the build does not say.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range info.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
}
