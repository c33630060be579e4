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

func TestRunCountsWhatTheServerSaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := Scenario{Name: "test", Rate: 10, Burst: 5, Workers: 20, Calls: 20}
		plain := Contenders()[0]
		r := Run(context.Background(), s, plain, NewInProcess(s))
		// All at once into a bucket of 5: 5 pass, 15 are refused and fail.
		if r.Received != 20 || r.Refused != 15 || r.Failed != 15 || r.Calls != 20 {
			t.Errorf("Run = %+v, want 20 received, 15 refused and failed", r)
		}
		if want := 1500 * time.Millisecond; r.Ideal != want {
			t.Errorf("Ideal = %v, want (20 − 5) / 10 per second = %v", r.Ideal, want)
		}
	})
}

func TestScenariosCoverTheTargets(t *testing.T) {
	var headers, latency, wide int
	for _, s := range Scenarios() {
		switch {
		case s.Headers:
			headers++
		case s.Latency > 0:
			latency++
		case s.Workers == 200:
			wide++
		}
	}
	if headers != 2 || latency != 2 || wide != 2 || len(Scenarios()) != 8 {
		t.Errorf("%d scenarios, %d with headers, %d with latency, %d with 200 workers; want both servers in each", len(Scenarios()), headers, latency, wide)
	}
}
