package bench

import (
	"context"
	"flag"
	"os"
	"testing"
	"testing/synctest"
)

var fast = flag.Bool("fast", false, "print the in-process tables of every scenario (fake time)")

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
