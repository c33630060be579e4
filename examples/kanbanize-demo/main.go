// Command kanbanize-demo shows, with no network and no setup, what
// ratewise does for a batch of Kanbanize card reads under a plan's rate
// limit. It starts the fake Kanbanize API in process, with the plan's
// limits on a faster clock, and reads a batch of cards several at once
// four times: as a plain net/http client does (three GETs a card, no
// retry); with the kanbanize client's ReadCardWithRetry not told the plan
// (its transport learns the limit from the refusals); told the plan; and
// with the plan auto, reading the limits from the API's /apiLimits. It
// prints the runs side by side. The fake's refusals say nothing of when
// to come back, as the real API's are not known to, unless -retry-after.
//
//	go run ./examples/kanbanize-demo [-cards 25] [-concurrency 5] [-plan standard] [-speed 20] [-retry-after] [-json]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/ratewise/ratewise/kanbanize"
)

func main() {
	var cfg config
	var plan string
	flag.IntVar(&cfg.cards, "cards", 25, "cards to read in each run")
	flag.IntVar(&cfg.concurrency, "concurrency", 5, "cards read at once")
	flag.StringVar(&plan, "plan", "standard", "the account plan whose limits the fake API enforces: standard, large, extra-large, or a custom plan's limits a minute and an hour like 45/700")
	flag.Float64Var(&cfg.speed, "speed", 20, "how many times faster than real the plan's windows run (20: a minute's quota every 3s)")
	flag.BoolVar(&cfg.retryAfter, "retry-after", false, "make the fake API's refusals carry Retry-After, which the real API is not known to send")
	flag.BoolVar(&cfg.json, "json", false, "print the results as JSON")
	flag.Parse()

	p, err := kanbanize.ParsePlan(plan)
	if err == nil {
		cfg.plan = p
		err = cfg.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kanbanize-demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "kanbanize-demo:", err)
		os.Exit(1)
	}
}
