// Command goodput runs the goodput simulator on loopback, in real time:
// for each scenario, every contender makes its calls against a fresh
// rate-limited server, and a table says how fast the batch finished and
// how many requests the server refused.
//
//	go run ./bench/cmd/goodput [-run regexp] [-contender regexp]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/ratewise/ratewise/bench"
)

func main() {
	runFilter := flag.String("run", "", "only the scenarios whose description matches this regexp")
	contenderFilter := flag.String("contender", "", "only the contenders whose name matches this regexp")
	flag.Parse()
	scenarios, err := regexp.Compile(*runFilter)
	if err == nil {
		var contenders *regexp.Regexp
		if contenders, err = regexp.Compile(*contenderFilter); err == nil {
			run(scenarios, contenders)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "goodput:", err)
	os.Exit(2)
}

func run(scenarios, contenders *regexp.Regexp) {
	ctx := context.Background()
	for _, s := range bench.Scenarios() {
		if !scenarios.MatchString(s.String()) {
			continue
		}
		var results []bench.Result
		for _, c := range bench.Contenders() {
			if !contenders.MatchString(c.Name) {
				continue
			}
			srv := bench.NewLoopback(s)
			results = append(results, bench.Run(ctx, s, c, srv))
			srv.Close()
			fmt.Fprintf(os.Stderr, "%s: %s done\n", s.Name, c.Name)
		}
		bench.Table(os.Stdout, s, results)
	}
}
