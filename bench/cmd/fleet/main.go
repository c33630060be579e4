// Command fleet runs the fleet scenarios of the goodput simulator with
// each replica its own OS process: for each fleet scenario of a bucket or
// a window and each server on loopback that fits it, every contender's
// replicas (this binary, started again) call one server that this
// process runs, sharing state only through one redis-server that it
// starts, emptied before each run. A table says how fast the fleet's
// calls finished and how many requests the server refused.
// redis-server and nginx are installed with apt-get when missing.
//
//	go run ./cmd/fleet [-scenario regexp] [-server regexp] [-contender regexp] [-runs N] [-list]
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
	if bench.IsFleetReplica() {
		os.Exit(bench.RunFleetReplica(os.Stdout))
	}
	var scenario, server, contender string
	flag.StringVar(&scenario, "scenario", "", "only the fleet scenarios whose description matches this regexp")
	flag.StringVar(&server, "server", "", "only the servers whose name matches this regexp")
	flag.StringVar(&contender, "contender", "", "only the contenders whose name matches this regexp")
	runs := flag.Int("runs", 1, "run each contender this many times, a row each")
	list := flag.Bool("list", false, "list the tables selected, and run nothing")
	flag.Parse()
	f, err := bench.ParseFilter(scenario, server, contender)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(2)
	}
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "fleet: -runs is %d, want 1 or more\n", *runs)
		os.Exit(2)
	}
	matchups := bench.FleetMatchups(f)
	if len(matchups) == 0 {
		fmt.Fprintln(os.Stderr, "fleet: no fleet scenario, server and contender match")
		os.Exit(2)
	}
	if *list {
		for _, m := range matchups {
			fmt.Printf("%s — %s: %d contenders\n", m, m.API.Title(), len(m.Contenders))
		}
		return
	}
	if err := run(context.Background(), matchups, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, matchups []bench.FleetMatchup, runs int) error {
	redis, err := bench.StartRedis()
	if err != nil {
		return err
	}
	defer redis.Close()
	for _, m := range matchups {
		ideal := m.API.Ideal(m.Scenario)
		var rows []bench.FleetResult
		for _, c := range m.Contenders {
			for i := range runs {
				r, err := runOnce(ctx, redis.Addr, m, c, ideal)
				if err != nil {
					return fmt.Errorf("%s, %s, %s: %w", m.Scenario.Name, m.API.Name, c.Name, err)
				}
				if runs > 1 {
					r.Contender = fmt.Sprintf("%s (run %d)", c.Name, i+1)
				}
				if r.Late > 0 {
					fmt.Fprintf(os.Stderr, "%s, %s: %s: a replica was ready %v after the start\n",
						m.Scenario.Name, m.API.Name, r.Contender, r.Late.Round(time.Millisecond))
				}
				fmt.Fprintf(os.Stderr, "%s, %s: %s done in %.2fs\n", m.Scenario.Name, m.API.Name, r.Contender, r.Wall.Seconds())
				rows = append(rows, r)
			}
		}
		bench.FleetTable(os.Stdout, m, rows)
	}
	return nil
}

// runOnce runs c's fleet against a fresh server.
func runOnce(ctx context.Context, redisAddr string, m bench.FleetMatchup, c bench.FleetContender, ideal time.Duration) (bench.FleetResult, error) {
	srv, err := m.API.Loopback(m.Scenario)
	if err != nil {
		return bench.FleetResult{}, err
	}
	defer srv.Close()
	return bench.RunFleet(ctx, redisAddr, m.Scenario, c, srv, ideal)
}
