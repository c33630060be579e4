// Command goodput runs the goodput simulator on loopback, in real time:
// for each scenario and each server that fits it, every contender makes
// its calls against a fresh server on 127.0.0.1, and a table says how
// fast the batch finished and how many requests the server refused.
// nginx is installed with apt-get when a selected table needs it and it
// is missing.
//
//	go run ./bench/cmd/goodput [-scenario regexp] [-server regexp] [-contender regexp]
//
// -run is another name for -scenario. Every run ends by its scenario's
// deadline.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/ratewise/ratewise/bench"
)

func main() {
	var scenario, server, contender string
	flag.StringVar(&scenario, "scenario", "", "only the scenarios whose description matches this regexp")
	flag.StringVar(&scenario, "run", "", "the same as -scenario")
	flag.StringVar(&server, "server", "", "only the servers whose name matches this regexp")
	flag.StringVar(&contender, "contender", "", "only the contenders whose name matches this regexp")
	list := flag.Bool("list", false, "list the tables selected, and run nothing")
	flag.Parse()
	f, err := bench.ParseFilter(scenario, server, contender)
	if err != nil {
		fmt.Fprintln(os.Stderr, "goodput:", err)
		os.Exit(2)
	}
	matchups := bench.Matchups(f, false)
	if len(matchups) == 0 {
		fmt.Fprintln(os.Stderr, "goodput: no scenario, server and contender match")
		os.Exit(2)
	}
	if *list {
		for _, m := range matchups {
			fmt.Printf("%s — %s: %d contenders\n", m.Scenario, m.API.Title(), len(m.Contenders))
		}
		return
	}
	if err := run(context.Background(), matchups); err != nil {
		fmt.Fprintln(os.Stderr, "goodput:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, matchups []bench.Matchup) error {
	for _, m := range matchups {
		var err error
		rows := m.Rows(func(c bench.Contender, ideal time.Duration) bench.Result {
			if err != nil {
				return bench.Result{Contender: c.Name}
			}
			var srv bench.Server
			if srv, err = m.API.Loopback(m.Scenario); err != nil {
				err = fmt.Errorf("%s: %w", m.API.Name, err)
				return bench.Result{Contender: c.Name}
			}
			defer srv.Close()
			m.AwaitPhase(ctx)
			r := bench.Run(ctx, m.Scenario, c, srv, ideal)
			fmt.Fprintf(os.Stderr, "%s, %s: %s done\n", m.Scenario.Name, m.API.Name, c.Name)
			return r
		})
		if err != nil {
			return err
		}
		bench.Table(os.Stdout, m, rows)
	}
	return nil
}
