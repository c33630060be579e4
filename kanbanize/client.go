// Package kanbanize is a client of the Kanbanize (Businessmap) API v2 for
// reading cards, built on the ratewise transport so that it keeps working
// when the API answers 429. [Client.ReadCard] reads a card, its comments
// and its subtasks one after the other, with no retry; [Client.ReadCardWithRetry]
// reads the card with retries, then its comments and subtasks in parallel
// under one wait budget, and returns an [Envelope] that keeps what it got
// when a part fails.
package kanbanize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ratewise/ratewise"
)

// Client reads cards from one Kanbanize account. It is safe for concurrent
// use.
type Client struct {
	base   string // https://acme.kanbanize.com/api/v2, no trailing slash
	apiKey string
	http   *http.Client
}

// Option configures a Client in NewClient.
type Option func(*clientConfig)

type clientConfig struct {
	http *http.Client
	plan Plan
}

// WithHTTPClient sends requests with c. A c whose Transport is a
// *ratewise.Transport is used as it is, with its limits and breaker; any
// other transport (nil meaning http.DefaultTransport) becomes the base of
// a ratewise transport the client adds, since ReadCardWithRetry needs one.
func WithHTTPClient(c *http.Client) Option {
	return func(cfg *clientConfig) { cfg.http = c }
}

// WithPlan paces the client under the account plan's published limits
// (see PlanLimits), so that it seldom meets a 429 at all. It applies to
// the ratewise transport the client builds; a ratewise transport given
// through WithHTTPClient carries its own limits.
func WithPlan(p Plan) Option {
	return func(cfg *clientConfig) { cfg.plan = p }
}

// NewClient returns a client of the account, given as a subdomain ("acme"),
// an account URL (https://acme.kanbanize.com, https://acme.businessmap.io)
// or the API's base URL (https://acme.kanbanize.com/api/v2), with the API
// key it sends in the apikey header.
func NewClient(account, apiKey string, opts ...Option) (*Client, error) {
	base, err := baseURL(account)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(apiKey) == "" {
		return nil, errors.New("kanbanize: the API key is empty")
	}
	var cfg clientConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	var limits []ratewise.Option
	if cfg.plan != "" {
		scopes, err := PlanLimits(cfg.plan)
		if err != nil {
			return nil, err
		}
		for _, l := range scopes {
			limits = append(limits, ratewise.WithLimit(l))
		}
	}
	hc := cfg.http
	switch {
	case hc == nil:
		hc = &http.Client{Transport: newTransport(nil, limits)}
	case isRatewise(hc.Transport):
		if cfg.plan != "" {
			return nil, errors.New("kanbanize: WithPlan cannot add limits to the ratewise transport of WithHTTPClient: give it the PlanLimits scopes itself")
		}
	default:
		own := *hc
		own.Transport = newTransport(hc.Transport, limits)
		hc = &own
	}
	return &Client{base: base, apiKey: apiKey, http: hc}, nil
}

func isRatewise(rt http.RoundTripper) bool {
	_, ok := rt.(*ratewise.Transport)
	return ok
}

// newTransport is the ratewise transport a client builds: the retry policy
// of ReadCardWithRetry's defaults, limits if any.
func newTransport(base http.RoundTripper, limits []ratewise.Option) *ratewise.Transport {
	opts := append([]ratewise.Option{ratewise.WithRetry(RetryOptions{}.RetryPolicy())}, limits...)
	return ratewise.New(base, opts...)
}

// baseURL turns an account into the API's base URL.
func baseURL(account string) (string, error) {
	account = strings.TrimSpace(account)
	if account == "" {
		return "", errors.New("kanbanize: the account is empty: give a subdomain like acme or a URL like https://acme.kanbanize.com")
	}
	if !strings.Contains(account, "://") {
		if !validSubdomain(strings.ToLower(account)) {
			return "", fmt.Errorf("kanbanize: account %q is not a subdomain like acme, nor a URL", account)
		}
		return "https://" + strings.ToLower(account) + ".kanbanize.com/api/v2", nil
	}
	u, err := url.Parse(account)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("kanbanize: account %q is not an http(s) URL", account)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("kanbanize: account URL %s must not carry credentials, a query or a fragment", u.Redacted())
	}
	path := strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(path, "/api/v2") {
		path += "/api/v2"
	}
	return u.Scheme + "://" + u.Host + path, nil
}

// maxBody bounds what is read of an answer.
const maxBody = 16 << 20

// get fetches path and decodes the answer's data into into.
func (c *Client) get(ctx context.Context, path string, into any) error {
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
	if len(answer.Data) == 0 {
		return fmt.Errorf("kanbanize: GET %s: the answer has no data", path)
	}
	if err := json.Unmarshal(answer.Data, into); err != nil {
		return fmt.Errorf("kanbanize: GET %s: malformed data: %w", path, err)
	}
	return nil
}

func cardPath(id ID) string { return "/cards/" + id.String() }

// ReadCard reads a card, then its comments, then its subtasks: three
// requests one after the other, none retried (the client's limits still
// pace them). Any failure fails the whole read. card is a card number or
// URL (see ParseCardID).
func (c *Client) ReadCard(ctx context.Context, card string) (*CardDetails, error) {
	id, err := ParseCardID(card)
	if err != nil {
		return nil, err
	}
	ctx = ratewise.WithRetryPolicy(ctx, ratewise.RetryPolicy{MaxAttempts: 1})
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
