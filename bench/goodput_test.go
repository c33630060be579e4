package bench

import (
	"context"
	"flag"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

var fast = flag.Bool("fast", false, "print the in-process tables of every scenario (fake time)")

// Scenarios are the configurations.
func Scenarios() []Scenario {
	base := []Scenario{
		{Name: "50/s", Rate: 50, Burst: 10, Workers: 20, Calls: 500},
		{Name: "20/s", Rate: 20, Burst: 10, Workers: 50, Calls: 300},
	}
	var all []Scenario
	for _, s := range base {
		all = append(all, s)
		h := s
		h.Headers = true
		all = append(all, h)
		l := s
		l.Latency = 5 * time.Millisecond
		all = append(all, l)
		w := s
		w.Workers = 200
		all = append(all, w)
	}
	return all
}

func TestGoodputInProcess(t *testing.T) {
	if !*fast {
		t.Skip("run with -fast to print the in-process tables")
	}
	for _, s := range Scenarios() {
		var results []Result
		for _, c := range Contenders() {
			synctest.Test(t, func(t *testing.T) {
				srv := NewInProcess(s)
				results = append(results, Run(context.Background(), s, c, srv))
			})
		}
		Table(os.Stdout, s, results)
	}
}
