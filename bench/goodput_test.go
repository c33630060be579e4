package bench

import (
	"context"
	"flag"
	"os"
	"regexp"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/ratewisetest"
)

var (
	fast      = flag.Bool("fast", false, "print the in-process tables (fake time)")
	scenarioF = flag.String("scenario", "", "with -fast, only the scenarios whose description matches this regexp")
	serverF   = flag.String("server", "", "with -fast, only the servers whose name matches this regexp")
	contender = flag.String("contender", "", "with -fast, only the contenders whose name matches this regexp")
)

// fakeStart is when the in-process runs start, in fake time: in this
// decade, and, as a real client starts, a fraction past a whole second,
// so that a server started with it does not see its windows end on whole
// seconds.
var fakeStart = time.Date(2026, 1, 1, 0, 0, 0, 370_000_000, time.UTC)

func TestGoodputInProcess(t *testing.T) {
	if !*fast {
		t.Skip("run with -fast to print the in-process tables")
	}
	f := Filter{Scenario: regexp.MustCompile(*scenarioF), Server: regexp.MustCompile(*serverF),
		Contender: regexp.MustCompile(*contender)}
	for _, m := range Matchups(f, true) {
		var results []Result
		for _, c := range m.Contenders {
			synctest.Test(t, func(t *testing.T) {
				// Fake time starts in 2000, when a Unix time was below
				// the 10^9 seconds that tell it from a delta: start the
				// run where servers are.
				time.Sleep(time.Until(fakeStart))
				srv, err := m.API.InProcess(m.Scenario)
				if err != nil {
					t.Fatalf("%s: %v", m.API.Name, err)
				}
				defer srv.Close()
				results = append(results, Run(context.Background(), m.Scenario, c, srv, m.API.Ideal(m.Scenario)))
			})
		}
		Table(os.Stdout, m.Scenario, m.API, results)
	}
}

func TestRunCountsWhatTheServerSaw(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := Scenario{Name: "test", Rate: 10, Burst: 5, Workers: 20, Calls: 20}
		srv := NewInProcess(ratewisetest.Config{Rate: s.Rate, Burst: s.Burst})
		r := Run(context.Background(), s, Plain(), srv, TokenBucket.Ideal(s))
		// All at once into a bucket of 5: 5 pass, 15 are refused and fail.
		if r.Received != 20 || r.Refused != 15 || r.Failed != 15 || r.Calls != 20 || r.Cut {
			t.Errorf("Run = %+v, want 20 received, 15 refused and failed, not cut", r)
		}
		if want := 1500 * time.Millisecond; r.Ideal != want {
			t.Errorf("Ideal = %v, want (20 − 5) / 10 per second = %v", r.Ideal, want)
		}
	})
}

func TestRunStopsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Ten calls at one a minute: the deadline is 10 × 9m + 1m. A
		// server that takes an hour to answer gets one call done by then,
		// the next cut short, and eight never made.
		s := Scenario{Name: "slow", Rate: 1.0 / 60, Burst: 1, Workers: 1, Calls: 10}
		srv := NewInProcess(ratewisetest.Config{Latency: time.Hour})
		start := time.Now()
		r := Run(context.Background(), s, Plain(), srv, TokenBucket.Ideal(s))
		if got, want := time.Since(start), 91*time.Minute; got != want || s.Deadline() != want || !r.Cut {
			t.Errorf("Run took %v (cut %v), deadline %v; want %v, cut", got, r.Cut, s.Deadline(), want)
		}
		if r.Failed != 9 {
			t.Errorf("Run failed %d calls, want 9: one cut short, eight never made", r.Failed)
		}
	})
}

func TestIdeal(t *testing.T) {
	bucket := Scenario{Rate: 50, Burst: 10, Calls: 500}
	window := Scenario{Limit: 30, Window: 10 * time.Second, Calls: 120}
	tests := []struct {
		model Model
		s     Scenario
		want  time.Duration
	}{
		{TokenBucket, bucket, 9800 * time.Millisecond},
		{GCRA, bucket, 9800 * time.Millisecond},
		{NginxNoDelay, bucket, 9780 * time.Millisecond},
		{NginxQueued, bucket, 9980 * time.Millisecond},
		{FixedWindow, window, 30 * time.Second},
		{FixedWindowFromFirst, window, 30 * time.Second},
		{FixedWindow, Scenario{Limit: 30, Window: 10 * time.Second, Calls: 121}, 40 * time.Second},
		{SlidingWindow, window, 39833333333},
	}
	for _, tt := range tests {
		if got := tt.model.Ideal(tt.s); got != tt.want {
			t.Errorf("%v.Ideal(%d calls) = %v, want %v", tt.model, tt.s.Calls, got, tt.want)
		}
	}
}

func TestMatchups(t *testing.T) {
	all := Matchups(Filter{}, false)
	inProcess := Matchups(Filter{}, true)
	seen := map[string]bool{}
	for _, m := range all {
		if m.API.Model.Windowed() != m.Scenario.Windowed() {
			t.Errorf("%s runs against %s, a %v", m.Scenario, m.API.Name, m.API.Model)
		}
		for _, c := range m.Contenders {
			if c.Told && m.Scenario.Replicas > 1 {
				t.Errorf("%s runs %s, which is told the limit", m.Scenario, c.Name)
			}
		}
		seen[m.Scenario.Name] = true
	}
	for _, s := range Scenarios() {
		if !seen[s.Name] {
			t.Errorf("scenario %s has no table", s)
		}
	}
	for _, m := range inProcess {
		if m.API.InProcess == nil {
			t.Errorf("in process, %s has a table against %s, which cannot run in fake time", m.Scenario, m.API.Name)
		}
	}
	if len(inProcess) >= len(all) {
		t.Errorf("%d tables in process, %d on loopback; want fewer in process", len(inProcess), len(all))
	}
	some := Matchups(Filter{Server: regexp.MustCompile("throttled"), Contender: regexp.MustCompile("^ratewise told")}, true)
	// The fleet leaves out the one contender selected: no table.
	if len(some) != 1 || some[0].Scenario.Name != "bucket" || len(some[0].Contenders) != 1 {
		t.Errorf("Matchups(throttled, ratewise told) = %+v, want the bucket's table alone, with one contender", some)
	}
}
