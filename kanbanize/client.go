// Package kanbanize is a client of the Kanbanize (Businessmap) API v2 for
// reading cards, built on the ratewise transport so that it keeps working
// when the API answers 429. [Client.ReadCard] reads a card, its comments
// and its subtasks one after the other, with no retry; [Client.ReadCardWithRetry]
// reads the card with retries, then its comments and subtasks in parallel
// under one wait budget, and returns an [Envelope] that keeps what it got
// when a part fails.
//
// # Plans
//
// WithPlan paces the client under the account plan's limits, so that
// it seldom meets a 429 at all: a published plan's or a CustomPlan's (see
// PlanLimits), or, with PlanAuto, the limits the API tells the account.
//
// A published or custom plan's scopes are built into the client's own
// transport; a ratewise transport given through WithHTTPClient gets them
// added (ratewise.Transport.AddLimit), unless it has scopes of those
// names already, as when clients of one plan share it: it then keeps its
// own. The scopes pace only requests that carry an apikey header, each
// key apart, so a shared transport's other traffic is never paced by the
// plan; clients of different plans sharing one transport are paced by
// each plan's scopes, the strictest binding.
//
// With PlanAuto the client reads GET /api/v2/apiLimits at its first call
// (the calls made beside it wait for that read), then adds two scopes
// of its key, "kanbanize auto apikey:… per minute" and "... per hour",
// to its transport, whichever it is: each its key's limit, as a token
// bucket as large as the window's quota. The read is a request the API
// counts: it goes through the transport and takes a turn of the scopes
// it sets up. It is made once per key and transport: a second client of
// the key sharing the transport takes the scopes the first one added.
// The limits may change: the first call LimitsRereadInterval after a
// read reads them again, and the scopes take new numbers, keeping their
// buckets' tokens (unchanged ones are left as they are). When the
// endpoint does not tell them (404, 403, an answer that cannot be read,
// a network error, an empty list), the client paces under no limit of
// its own and the transport learns the limits from the API's refusals,
// as with no plan: after a 404, a 403 or an unreadable answer the client
// never asks again; after a network error, a refusal or an empty list it
// asks again, as above. Client.Limits says what it paces
// under; WithLogger's logger hears each read as event=api_limits.
//
// # Keys and accounts
//
// NewClient returns a client of the account, given as a subdomain ("acme"),
// an account URL (https://acme.kanbanize.com, https://acme.businessmap.io)
// or the API's base URL (https://acme.kanbanize.com/api/v2), with the API
// key it sends in the apikey header.
//
// Without WithPlan the client's transport paces nothing until the API
// refuses a request, then paces each host by what it learned from the
// refusals (ratewise.New's default); with a plan, it paces under the
// plan's limits, per API key. Per key, because nothing public says
// whether the API counts its limits per key or per account, and the key
// is what a client can tell apart. When several keys share an account's
// limit, one key's requests can be refused for what the others spent:
// the transport's retries, what it learns from the refusals and the
// client's breaker (per key) keep the client polite then, at the cost of
// refusals (one for every three requests served on average, when two
// keys each pace at the whole account's limit) and, now and then, of a
// call that the other keys starve of every turn its attempts could have.
//
// # Logging
//
// WithLogger makes the client log to l, as structured events: its
// transport's (rate_retry, rate_wait, rate_success, rate_giveup,
// breaker_state: see ratewise.WithLogger) and its own (rate_partial, at
// Warn, when ReadCardWithRetry returns without the comments or the
// subtasks). No API key is logged. A ratewise transport given through
// WithHTTPClient is already built and is not changed: l then serves the
// client's own events only; give that transport ratewise.WithLogger
// where it is built for the rest. Without WithLogger the client logs
// nothing.
//
// # Plan scopes
//
// PlanLimits returns the ratewise limit scopes of a published or custom
// plan: one per minute and one per hour, each a token bucket as large as
// the window's quota, named "kanbanize <plan> per minute" and "... per
// hour". They apply only to requests that carry an apikey header, so
// that a transport shared with other APIs paces nothing else by them,
// and keep a bucket per API key (hashed: the key never shows in
// statuses or errors). Per key, because nothing public says whether the
// API counts its limits per key or per account, and a key is what the
// client can tell apart: an account whose users share its limits, each
// with a key, is kept polite by the transport's retries, pauses and
// breaker when another key has spent the quota (see NewClient). Give
// each scope to ratewise.WithLimit or Transport.AddLimit, or the plan to
// WithPlan. PlanAuto has no scopes of its own: WithPlan reads them from
// the API.
//
// # Cards
//
// Card is a Kanbanize card as API v2 returns it (GET /cards/{card_id}):
// where it sits, who owns and watches it, its timeline, the cards linked
// to it, its own subtasks and attachments. Fields the API may send as null
// are pointers, zero-able types or raw JSON; fields it adds later are
// ignored. Custom fields and the block reason are kept as the API sends
// them: their shape depends on the field's type and the account's setup.
//
// The API has named the watchers both "watcher_ids" and "watchers_ids":
// a card reads either, or both merged, and writes "watcher_ids".
package kanbanize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/ratewise/ratewise"
)

// Client reads cards from one Kanbanize account. It is safe for concurrent
// use.
type Client struct {
	base      string // https://acme.kanbanize.com/api/v2, no trailing slash
	subdomain string // "acme", or "" for a base on another host
	apiKey    string
	http      *http.Client
	rw        *ratewise.Transport // the ratewise transport http calls through
	log       *slog.Logger        // the client's own events; nil logs nothing
	plan      Plan                // WithPlan's, or ""
	auto      *autoLimits         // with PlanAuto: the limits read from the API
}

// Option configures a Client in NewClient.
type Option func(*clientConfig)

type clientConfig struct {
	http          *http.Client
	plan          Plan
	log           *slog.Logger
	transportOpts []ratewise.Option
}

// WithHTTPClient sends requests with a copy of c. A Transport that is a
// *ratewise.Transport, or wraps one and returns it from an Unwrap()
// http.RoundTripper method, is used as it is, with its limits and breaker;
// any other transport (nil meaning http.DefaultTransport) becomes the base
// of a ratewise transport the client adds, since ReadCardWithRetry needs
// one. Put wrappers such as tracing under ratewise, not over it, or give
// them an Unwrap method: two ratewise layers would multiply retries. The
// copy refuses redirects to another host, which would receive the API key.
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *clientConfig) { cfg.http = c }
}

// WithPlan paces the client under the account plan's limits, so that it
// seldom meets a 429: a published plan's or a CustomPlan's (PlanLimits), or,
// with PlanAuto, the limits the API tells the account. The scopes pace only
// requests that carry an apikey header, each key apart. See "Plans" in the
// package doc for shared transports and how PlanAuto reads and rereads.
func WithPlan(p Plan) Option {
	return func(cfg *clientConfig) { cfg.plan = p }
}

// WithLogger makes the client log to l: its transport's events (see
// ratewise.WithLogger) and its own (rate_partial, at Warn, when
// ReadCardWithRetry returns without the comments or the subtasks). No API
// key is logged. A transport given through WithHTTPClient is not changed:
// give it ratewise.WithLogger where it is built.
func WithLogger(l *slog.Logger) Option {
	return func(cfg *clientConfig) { cfg.log = l }
}

// WithTransportOptions adds opts to the ratewise transport the client
// builds, after its own (the retry policy, the breaker, the plan's
// limits, WithLogger's logger), so that they win where they clash: a
// ratewise.WithTrace hears every call, a ratewise.WithRetry replaces the
// client's policy, a ratewise.WithLimit adds a scope. It may be given
// more than once; the options add up. A ratewise transport given through
// WithHTTPClient is already built: NewClient then refuses
// WithTransportOptions with an error rather than drop them.
func WithTransportOptions(opts ...ratewise.Option) Option {
	return func(cfg *clientConfig) { cfg.transportOpts = append(cfg.transportOpts, opts...) }
}

// NewClient returns a client of the account, given as a subdomain ("acme"),
// an account URL (https://acme.kanbanize.com, https://acme.businessmap.io)
// or the API's base URL, with the API key it sends in the apikey header.
// Without WithPlan its transport learns each host's limit from the API's
// refusals; with a plan, it paces under the plan's limits, per API key (see
// "Keys and accounts" in the package doc).
func NewClient(account, apiKey string, opts ...Option) (*Client, error) {
	if err := checkAPIKey(apiKey); err != nil {
		return nil, err
	}
	if strings.TrimSpace(account) == apiKey {
		return nil, errors.New("kanbanize: the account is the API key: NewClient takes the account first, then the key")
	}
	base, err := baseURL(account)
	if err != nil {
		return nil, err
	}
	var cfg clientConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	var scopes []ratewise.Limit
	if cfg.plan != "" && cfg.plan != PlanAuto {
		if scopes, err = PlanLimits(cfg.plan); err != nil {
			return nil, err
		}
	}
	var hc http.Client // a copy: the caller's client is not changed
	if cfg.http != nil {
		hc = *cfg.http
	}
	rw := findRatewise(hc.Transport)
	if rw != nil {
		if len(cfg.transportOpts) > 0 {
			return nil, errors.New("kanbanize: WithTransportOptions cannot apply to the ratewise transport of WithHTTPClient, which is already built: " +
				"give those options to ratewise.New where it is built, or leave WithHTTPClient out")
		}
		if err := addScopes(rw, scopes); err != nil {
			return nil, err
		}
	} else {
		var opts []ratewise.Option
		for _, l := range scopes {
			opts = append(opts, ratewise.WithLimit(l))
		}
		if cfg.log != nil {
			opts = append(opts, ratewise.WithLogger(cfg.log))
		}
		rw = newTransport(hc.Transport, append(opts, cfg.transportOpts...))
		hc.Transport = rw
	}
	hc.CheckRedirect = sameHostRedirects(hc.CheckRedirect)
	c := &Client{base: base, subdomain: accountSubdomain(base), apiKey: apiKey, http: &hc, rw: rw, log: cfg.log, plan: cfg.plan}
	if cfg.plan == PlanAuto {
		c.auto = newAutoLimits(apiKey, rw)
	}
	return c, nil
}

// Limits returns the limits the client paces its calls under, and false
// when it paces under none of its own: with no plan, or with PlanAuto
// before its first call, or when the API did not tell them. Its
// transport then learns them from the API's refusals.
func (c *Client) Limits() (Limits, bool) {
	if c.auto != nil {
		return c.auto.told()
	}
	return c.plan.Limits()
}

// addScopes adds to rw each limit scope it has no scope of that name for:
// a transport that clients of one plan share gets the plan's once.
func addScopes(rw *ratewise.Transport, scopes []ratewise.Limit) error {
	has := func(name string) bool {
		return slices.ContainsFunc(rw.Limits(), func(l ratewise.Limit) bool { return l.Name == name })
	}
	for _, l := range scopes {
		if has(l.Name) {
			continue
		}
		// Another client sharing rw may add it meanwhile: then it is there.
		if err := rw.AddLimit(l); err != nil && !has(l.Name) {
			return fmt.Errorf("kanbanize: WithPlan: %w", err)
		}
	}
	return nil
}

// KeyStatus says what holds the client's calls back now, keyed by the
// API's host: the scopes of its plan and its breaker, kept per API key
// (the plan told by WithPlan, or read from the API under PlanAuto), and
// the transport's own scopes and pause, kept per host (the pace learned
// from the API's refusals among them). The API key shows only as the
// hash its state is kept under.
func (c *Client) KeyStatus() ratewise.KeyStatus {
	host := ""
	if u, err := url.Parse(c.base); err == nil {
		host = u.Host
	}
	st := c.rw.KeyStatus(host)
	keyed := c.rw.KeyStatus(ratewise.ByHeader("apikey")(&http.Request{Header: http.Header{apiKeyHeader: {c.apiKey}}}))
	for i, s := range st.Scopes {
		// A plan's scope (limitScopes): its state is the key's. A scope
		// added between the two looks keeps the host's.
		if strings.HasPrefix(s.Name, "kanbanize ") && i < len(keyed.Scopes) && keyed.Scopes[i].Name == s.Name {
			st.Scopes[i] = keyed.Scopes[i]
		}
	}
	st.Breaker = keyed.Breaker // the client's breaker is per API key
	return st
}

// Transport returns the ratewise transport the client calls through: the
// one it built, or the one WithHTTPClient brought. Ask it what it is doing
// (Stats, KeyStatus, BreakerStatuses) or turn it down at run time
// (SetRetryPolicy, SetLimit).
func (c *Client) Transport() *ratewise.Transport { return c.rw }

// findRatewise returns rt when it is a ratewise transport, or the one it
// wraps and returns from an Unwrap method; nil when there is none.
// Wrapping another ratewise layer around one would multiply every retry.
func findRatewise(rt http.RoundTripper) *ratewise.Transport {
	for range 16 { // a chain that long is a loop
		switch t := rt.(type) {
		case *ratewise.Transport:
			return t
		case interface{ Unwrap() http.RoundTripper }:
			rt = t.Unwrap()
		default:
			return nil
		}
	}
	return nil
}

// newTransport is the ratewise transport a client builds: the retry policy
// of ReadCardWithRetry's defaults, a breaker per API key that opens when 8
// requests fail within a minute (a 429 storm) and stays open longer each
// time its probe fails, then more: the plan's limits, a logger, the
// caller's options.
func newTransport(base http.RoundTripper, more []ratewise.Option) *ratewise.Transport {
	opts := append([]ratewise.Option{
		ratewise.WithRetry(RetryOptions{}.RetryPolicy()),
		ratewise.WithBreaker(ratewise.BreakerPolicy{
			Key:                 ratewise.ByHeader("apikey"),
			ConsecutiveFailures: 8,
			WindowFailures:      8,
			Window:              time.Minute,
			Cooldown:            10 * time.Second,
			Escalation:          []time.Duration{30 * time.Second, time.Minute, 5 * time.Minute},
			Decay:               10 * time.Minute,
		}),
	}, more...)
	return ratewise.New(base, opts...)
}

// sameHostRedirects refuses a redirect to another host, which would carry
// the apikey header there, then defers to next, the caller's policy.
func sameHostRedirects(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !strings.EqualFold(req.URL.Host, via[0].URL.Host) {
			return errors.New("kanbanize: refusing a redirect to another host, which would receive the API key")
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("kanbanize: stopped after 10 redirects")
		}
		return nil
	}
}

// checkAPIKey refuses a key that is empty or could not travel in a header.
func checkAPIKey(key string) error {
	if strings.TrimSpace(key) == "" {
		return errors.New("kanbanize: the API key is empty")
	}
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return errors.New("kanbanize: the API key holds spaces or control characters (a trailing newline?)")
		}
	}
	return nil
}

// baseURL turns an account into the API's base URL. Its errors never
// quote the account, which may hold a pasted secret.
func baseURL(account string) (string, error) {
	const want = "give a subdomain like acme or a URL like https://acme.kanbanize.com"
	account = strings.TrimSpace(account)
	if account == "" {
		return "", errors.New("kanbanize: the account is empty: " + want)
	}
	if !strings.Contains(account, "://") {
		if !validSubdomain(strings.ToLower(account)) {
			return "", errors.New("kanbanize: the account is neither a subdomain nor a URL: " + want)
		}
		return "https://" + strings.ToLower(account) + ".kanbanize.com/api/v2", nil
	}
	u, err := url.Parse(account)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", errors.New("kanbanize: the account is not an http(s) URL: " + want)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("kanbanize: the account URL for %s must not carry user info, a query or a fragment: the API key goes in its own argument", u.Hostname())
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return "", fmt.Errorf("kanbanize: the account URL for %s is plain http, which would send the API key in the clear: use https", u.Hostname())
	}
	path := strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(path, "/api/v2") {
		path += "/api/v2"
	}
	return u.Scheme + "://" + u.Host + path, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// accountSubdomain is the Kanbanize or Businessmap subdomain of a base URL,
// or "" for another host (a fake API, a proxy).
func accountSubdomain(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	sub, _ := accountOf(u.Hostname())
	return sub
}

// maxBody bounds what is read of an answer.
const maxBody = 16 << 20

// get fetches path and decodes the answer's data into into; with
// PlanAuto, after the account's limits are read (see autoLimits.prepare).
func (c *Client) get(ctx context.Context, path string, into any) error {
	if c.auto != nil {
		if err := c.auto.prepare(ctx, c); err != nil {
			return err
		}
	}
	return c.do(ctx, path, into)
}

// do fetches path and decodes the answer's data into into.
func (c *Client) do(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return fmt.Errorf("kanbanize: %w", err)
	}
	req.Header.Set("apikey", c.apiKey)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err // a *url.Error: the URL holds no credentials
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return newAPIError(resp)
	}
	var answer struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&answer); err != nil {
		return fmt.Errorf("kanbanize: GET %s: malformed JSON: %w", path, err)
	}
	if len(answer.Data) == 0 || string(answer.Data) == "null" {
		// {"data":null} would decode to a zero card, or a nil list.
		return fmt.Errorf("kanbanize: GET %s: the answer has no data", path)
	}
	if err := json.Unmarshal(answer.Data, into); err != nil {
		return fmt.Errorf("kanbanize: GET %s: malformed data: %w", path, err)
	}
	return nil
}

func cardPath(id ID) string { return "/cards/" + id.String() }

// cardID reads a card reference, refusing a card URL of another account
// than the client's.
func (c *Client) cardID(card string) (ID, error) {
	id, sub, err := parseCardRef(card)
	if err == nil && sub != "" && c.subdomain != "" && sub != c.subdomain {
		err = fmt.Errorf("%w: the card URL is of the account %s, and this client reads %s", ErrBadCardID, sub, c.subdomain)
	}
	return id, err
}

// ReadCard reads a card, then its comments, then its subtasks: three
// requests one after the other, none sent twice. Any failure fails the
// whole read. The client's transport still paces them under its limits
// and holds them while the API has asked the account to wait, within the
// default wait cap (ratewise.DefaultTotalWaitCap); give ctx a deadline to
// wait less. card is a card number or URL (see ParseCardID).
func (c *Client) ReadCard(ctx context.Context, card string) (*CardDetails, error) {
	id, err := c.cardID(card)
	if err != nil {
		return nil, err
	}
	once := RetryOptions{MaxAttempts: 1}.RetryPolicy()
	once.NetworkRetries = ratewise.NoNetworkRetries
	once.TotalWaitCap = ratewise.DefaultTotalWaitCap
	ctx = ratewise.WithRetryPolicy(ctx, once)
	d := &CardDetails{Comments: []Comment{}, Subtasks: []Subtask{}}
	if err := c.get(ctx, cardPath(id), &d.Card); err != nil {
		return nil, err
	}
	if err := c.get(ctx, cardPath(id)+"/comments", &d.Comments); err != nil {
		return nil, err
	}
	if err := c.get(ctx, cardPath(id)+"/subtasks", &d.Subtasks); err != nil {
		return nil, err
	}
	return d, nil
}
