package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// config is what the flags set.
type config struct {
	cards       int
	concurrency int
	plan        kanbanize.Plan
	speed       float64
	retryAfter  bool // the fake says when to come back; the real API may not
	json        bool
}

func (c config) validate() error {
	switch {
	case c.cards < 1 || c.cards > kanbanizetest.DefaultCards:
		return fmt.Errorf("-cards is %d; want 1 to %d", c.cards, kanbanizetest.DefaultCards)
	case c.concurrency < 1 || c.concurrency > 100:
		return fmt.Errorf("-concurrency is %d; want 1 to 100", c.concurrency)
	case c.speed <= 0 || c.speed > 3600:
		return fmt.Errorf("-speed is %v; want a factor above 0, at most 3600", c.speed)
	case c.plan == kanbanize.PlanAuto:
		// The fake enforces a plan's limits, which the auto run then
		// reads from its /apiLimits: there must be a plan to enforce.
		return errors.New("-plan is auto; want a plan whose limits the fake enforces (and the auto run reads): standard, large, extra-large, or a custom 45/700")
	}
	return nil
}

// apiKey is the fake's key: the demo's own, shown nowhere.
const apiKey = "demo-api-key"

// result is one run's outcome, a column of the table.
type result struct {
	Name        string  `json:"name"`
	WallSeconds float64 `json:"wall_seconds"`
	Requests    int     `json:"requests"`
	RateLimited int     `json:"rate_limited"`
	Complete    int     `json:"complete"`
	Partial     int     `json:"partial"`
	Failed      int     `json:"failed"`
}

// report is everything the demo found: a column for a plain client, and
// one for each way the kanbanize client can be given its plan.
type report struct {
	Cards       int                 `json:"cards"`
	Concurrency int                 `json:"concurrency"`
	Plan        kanbanize.Plan      `json:"plan"`
	RetryAfter  bool                `json:"retry_after"`
	Plain       result              `json:"plain"`
	Learning    result              `json:"client_not_told"`
	Told        result              `json:"client_plan_told"`
	Auto        result              `json:"client_plan_auto"`
	Example     *kanbanize.Envelope `json:"example_envelope,omitempty"`
}

// outcome is how one card's read ended.
type outcome int

const (
	complete outcome = iota // the card, its comments and its subtasks
	partial                 // the card, but not all of the rest
	failed                  // not even the card
)

// latency is the fake API's answer time, for a plausible wall time.
const latency = 20 * time.Millisecond

// run makes the four runs, shows progress on progressOut and writes the
// report on out.
func run(ctx context.Context, cfg config, out, progressOut io.Writer) (*report, error) {
	limits, err := kanbanize.PlanLimits(cfg.plan)
	if err != nil {
		return nil, err
	}
	// The real API is not known to say when to come back: by default the
	// fake does not either, and the client finds the limit by itself.
	fakeConfig := kanbanizetest.Config{APIKey: apiKey, PerMinute: limits[0].Burst, PerHour: limits[1].Burst,
		TimeScale: cfg.speed, Latency: latency}
	if cfg.retryAfter {
		fakeConfig.RetryAfter = kanbanizetest.RetryAfterSeconds
	}
	rep := &report{Cards: cfg.cards, Concurrency: cfg.concurrency, Plan: cfg.plan, RetryAfter: cfg.retryAfter}

	// Plain: what a service without rate-limit handling does.
	fake := kanbanizetest.New(fakeConfig)
	plainClient := &http.Client{Transport: fake.Transport()}
	rep.Plain = batch(ctx, "plain", cfg, fake, progressOut, func(ctx context.Context, id int, _ *progress) outcome {
		return readPlain(ctx, plainClient, id)
	}, nil)

	// Not told: kanbanize.NewClient as it comes, its transport learning
	// the limit from the API's refusals.
	var mu sync.Mutex
	rep.Learning, err = readWithRetry(ctx, "not told", cfg, kanbanizetest.New(fakeConfig), progressOut, nil, false, func(env *kanbanize.Envelope) {
		mu.Lock()
		defer mu.Unlock()
		if rep.Example == nil || env.RateLimitHits > rep.Example.RateLimitHits {
			rep.Example = env // the read that met the most refusals
		}
	})
	if err != nil {
		return nil, err
	}

	// Told: the plan's limits, on the fake's faster clock.
	var told []ratewise.Option
	for _, l := range limits {
		told = append(told, ratewise.WithLimit(faster(l, cfg.speed)))
	}
	rep.Told, err = readWithRetry(ctx, "plan told", cfg, kanbanizetest.New(fakeConfig), progressOut,
		[]kanbanize.Option{kanbanize.WithTransportOptions(told...)}, false, nil)
	if err != nil {
		return nil, err
	}

	// Auto: the limits the API tells at /apiLimits. They count real
	// minutes and hours, so once the client has read them (at its first
	// call) they are put on the fake's clock, as the told plan's are.
	rep.Auto, err = readWithRetry(ctx, "plan auto", cfg, kanbanizetest.New(fakeConfig), progressOut,
		[]kanbanize.Option{kanbanize.WithPlan(kanbanize.PlanAuto)}, true, nil)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	return rep, rep.write(out, cfg.json)
}

// faster is l with its rate on a clock speed times as fast: a window of
// the same quota, shorter.
func faster(l ratewise.Limit, speed float64) ratewise.Limit {
	l.Rate = rate.Limit(float64(l.Rate) * speed)
	return l
}

// autoScopes is how the scopes of the limits a PlanAuto client read are
// named, before the key.
const autoScopes = "kanbanize auto "

// readWithRetry is a run of ReadCardWithRetry by a kanbanize client of
// fake built with opts; each complete envelope goes to keep, when set. A
// client that reads its limits (auto, for PlanAuto) reads its first card
// alone, then the demo puts what it read on the fake's clock.
func readWithRetry(ctx context.Context, name string, cfg config, fake *kanbanizetest.Server, progressOut io.Writer,
	opts []kanbanize.Option, auto bool, keep func(*kanbanize.Envelope)) (result, error) {
	client, err := kanbanize.NewClient("acme", apiKey,
		append([]kanbanize.Option{kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()})}, opts...)...)
	if err != nil {
		return result{}, err
	}
	retry := kanbanize.RetryOptions{InitialDelayMs: 500, MaxDelayMs: 10000, TotalWaitCapMs: 120000}
	read := func(ctx context.Context, id int, p *progress) outcome {
		o := retry
		o.Progress = p.waiting
		env, err := client.ReadCardWithRetry(ctx, kanbanize.ID(id).String(), o)
		switch {
		case err != nil:
			return failed
		case env.PartialError != nil:
			return partial
		}
		if keep != nil {
			keep(env)
		}
		return complete
	}
	var first func()
	if auto {
		first = func() { speedUpAuto(client.Transport(), cfg.speed) }
	}
	return batch(ctx, name, cfg, fake, progressOut, read, first), nil
}

// speedUpAuto puts the scopes of the limits a PlanAuto client read on a
// clock speed times as fast.
func speedUpAuto(tr *ratewise.Transport, speed float64) {
	for _, l := range tr.Limits() {
		if strings.HasPrefix(l.Name, autoScopes) {
			_ = tr.SetLimit(faster(l, speed))
		}
	}
}

// batch reads cfg.cards cards, cfg.concurrency at once, with read, and
// counts what happened. When first is set, the first card is read alone,
// and first called, before the others.
func batch(ctx context.Context, name string, cfg config, fake *kanbanizetest.Server, progressOut io.Writer,
	read func(context.Context, int, *progress) outcome, first func()) result {
	p := newProgress(name, cfg.cards, fake, progressOut)
	start := time.Now()
	outcomes := make([]int, 3)
	var mu sync.Mutex
	readOne := func(id int) {
		o := read(ctx, id, p)
		mu.Lock()
		outcomes[o]++
		mu.Unlock()
		p.cardDone()
	}
	next := kanbanizetest.FirstCardID
	if first != nil {
		readOne(next)
		next++
		first()
	}
	ids := make(chan int)
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Go(func() {
			for id := range ids {
				readOne(id)
			}
		})
	}
feed:
	for id := next; id < kanbanizetest.FirstCardID+cfg.cards; id++ {
		select {
		case ids <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(ids)
	wg.Wait()
	wall := time.Since(start)
	p.stop()
	st := fake.Stats()
	return result{Name: name, WallSeconds: wall.Seconds(), Requests: st.Requests, RateLimited: st.Limited,
		Complete: outcomes[complete], Partial: outcomes[partial], Failed: outcomes[failed]}
}

// readPlain reads a card as a client with no rate-limit handling does:
// three GETs one after the other, giving up at the first failure.
func readPlain(ctx context.Context, client *http.Client, id int) outcome {
	base := fmt.Sprintf("https://acme.kanbanize.com/api/v2/cards/%d", id)
	for i, path := range []string{"", "/comments", "/subtasks"} {
		if err := getPlain(ctx, client, base+path); err != nil {
			if i == 0 {
				return failed
			}
			return partial
		}
	}
	return complete
}

func getPlain(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("apikey", apiKey)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		return errors.Join(fmt.Errorf("status %d", resp.StatusCode), err)
	}
	return nil
}

// write prints the report: an example envelope, then the table (last, so
// it stays in view), or everything as JSON.
func (r *report) write(out io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	if r.Example != nil {
		fmt.Fprintf(out, "\nThe envelope of the not-told run's read that met the most 429s, as the read_card_with_retry tool returns it:\n\n")
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.Example); err != nil {
			return err
		}
	}
	perMinute := planPerMinute(r.Plan)
	hint := "no Retry-After, as the real API is not known to send one"
	if r.RetryAfter {
		hint = "its refusals with Retry-After"
	}
	fmt.Fprintf(out, "\n%d cards of the %s plan (%d requests a minute, on a faster clock; %s), %d at once:\n\n",
		r.Cards, r.Plan, perMinute, hint, r.Concurrency)
	const row = "  %-30s %10s %12s %12s %12s\n"
	fmt.Fprintf(out, row, "", "plain", "kanbanize", "kanbanize", "kanbanize")
	fmt.Fprintf(out, row, "", "net/http", "not told", "plan told", "plan auto")
	rows := []struct {
		name   string
		values func(result) string
	}{
		{"wall time", func(x result) string { return fmt.Sprintf("%.1fs", x.WallSeconds) }},
		{"requests the server received", func(x result) string { return fmt.Sprint(x.Requests) }},
		{"429s", func(x result) string { return fmt.Sprint(x.RateLimited) }},
		{"cards complete", func(x result) string { return fmt.Sprint(x.Complete) }},
		{"cards partial", func(x result) string { return fmt.Sprint(x.Partial) }},
		{"cards failed", func(x result) string { return fmt.Sprint(x.Failed) }},
	}
	for _, line := range rows {
		fmt.Fprintf(out, row, line.name, line.values(r.Plain), line.values(r.Learning), line.values(r.Told), line.values(r.Auto))
	}
	if 3*r.Cards <= perMinute {
		fmt.Fprintf(out, "\n(%d requests fit in the plan's minute: try more -cards to see the limit bite.)\n", 3*r.Cards)
	}
	return nil
}

func planPerMinute(p kanbanize.Plan) int {
	if limits, err := kanbanize.PlanLimits(p); err == nil {
		return limits[0].Burst
	}
	return 0
}
