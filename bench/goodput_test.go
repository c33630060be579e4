package bench

import (
	"context"
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
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
var fakeStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(StartPhase)

func TestGoodputInProcess(t *testing.T) {
	if !*fast {
		t.Skip("run with -fast to print the in-process tables")
	}
	f, err := ParseFilter(*scenarioF, *serverF, *contender)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Matchups(f, true) {
		rows := m.Rows(func(c Contender, ideal time.Duration) Result {
			var r Result
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
				r = Run(context.Background(), m.Scenario, c, srv, ideal)
			})
			return r
		})
		Table(os.Stdout, m, rows)
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
	capped := Scenario{Limit: 5, Service: 50 * time.Millisecond, Calls: 300}
	tests := []struct {
		model Model
		s     Scenario
		want  time.Duration
	}{
		{TokenBucket, bucket, 9800 * time.Millisecond},
		{GCRA, bucket, 9800 * time.Millisecond},
		{NginxNoDelay, bucket, 9780 * time.Millisecond},
		{NginxQueued, bucket, 9980 * time.Millisecond},
		{TokenBucket, Scenario{Rate: 20, Burst: 10, Calls: 300}, 14500 * time.Millisecond},
		{FixedWindow, window, 30 * time.Second},
		{FixedWindowFromFirst, window, 30 * time.Second},
		{FixedWindow, Scenario{Limit: 30, Window: 10 * time.Second, Calls: 121}, 40 * time.Second},
		{SlidingWindow, window, 39833333333},
		{ConcurrencyCap, capped, 3 * time.Second}, // calls × service / cap
		{ConcurrencyCap, Scenario{Limit: 5, Service: 50 * time.Millisecond, Calls: 301}, 3050 * time.Millisecond},
		{LoadShed, Scenario{Shed: 2.0 / 3, Calls: 50}, 0}, // none: the Baseline's wall time stands in
	}
	for _, tt := range tests {
		if got := tt.model.Ideal(tt.s); got != tt.want {
			t.Errorf("%v.Ideal(%d calls) = %v, want %v", tt.model, tt.s.Calls, got, tt.want)
		}
	}
}

// TestFakeIdealIsTheModels checks that each fake server's ideal, which is
// ratewisetest's, agrees with the model's, but for the sliding window,
// whose model rounds.
func TestFakeIdealIsTheModels(t *testing.T) {
	for _, m := range Matchups(Filter{Server: regexp.MustCompile("^ratewisetest")}, true) {
		if m.API.Model == SlidingWindow {
			continue
		}
		if got, want := m.API.Ideal(m.Scenario), m.API.Model.Ideal(m.Scenario); got != want {
			t.Errorf("%s against %s: ideal %v, the model's %v", m.Scenario, m.API.Name, got, want)
		}
	}
}

func TestScenarioKinds(t *testing.T) {
	want := map[string]Kind{
		"bucket": Bucket, "bucket 50 workers": Bucket, "bucket 200 workers": Bucket, "fleet": Bucket, "fleet 8": Bucket,
		"window 1s": Window, "window 10s": Window, "window fleet": Window, "window fleet 8": Window,
		"cap": Concurrency, "shed": Shedding,
		"shed GETs": Shedding, "shed GETs, short backoff": Shedding, "shed GETs, 200 calls": Shedding,
	}
	for _, s := range Scenarios() {
		if got, ok := want[s.Name]; !ok || s.Kind() != got {
			t.Errorf("%s: kind %v, want %v", s, s.Kind(), got)
		}
		if s.Workers%s.replicas() != 0 {
			t.Errorf("%s: %d workers do not share evenly among %d clients", s, s.Workers, s.replicas())
		}
	}
}

// names returns the names of cs.
func names(cs []Contender) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func TestMatchups(t *testing.T) {
	all := Matchups(Filter{}, false)
	inProcess := Matchups(Filter{}, true)
	scenarios, servers := map[string]bool{}, map[string]bool{}
	for _, m := range all {
		if m.API.Model.Kind() != m.Scenario.Kind() {
			t.Errorf("%s runs against %s, a %v", m.Scenario, m.API.Name, m.API.Model)
		}
		for i, c := range m.Contenders {
			if c.Told && (m.Scenario.Replicas > 1 || m.Scenario.Kind() == Shedding) {
				t.Errorf("%s runs %s, which is told the limit", m.Scenario, c.Name)
			}
			if c.Kinds != nil && !slices.Contains(c.Kinds, m.Scenario.Kind()) {
				t.Errorf("%s runs %s, which has no form for a %v", m.Scenario, c.Name, m.Scenario.Kind())
			}
			if m.Baselined() && (i == 0) != (c.Name == Baseline) {
				t.Errorf("%s against %s runs %s %d: want %s first", m.Scenario, m.API.Name, c.Name, i+1, Baseline)
			}
		}
		if !slices.Contains(names(m.Contenders), Baseline) {
			t.Errorf("%s against %s does not run %s", m.Scenario, m.API.Name, Baseline)
		}
		scenarios[m.Scenario.Name] = true
		servers[m.API.Name] = true
	}
	for _, s := range Scenarios() {
		if !scenarios[s.Name] {
			t.Errorf("scenario %s has no table", s)
		}
	}
	for _, a := range APIs() {
		if !servers[a.Name] {
			t.Errorf("server %s has no table", a.Name)
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
}

func TestMatchupsFiltered(t *testing.T) {
	re := regexp.MustCompile
	tests := []struct {
		name string
		give Filter
		want []string // scenario, server: contenders
	}{
		{
			// The fleets leave out the one contender selected: no table.
			name: "one server, told",
			give: Filter{Server: re("^throttled/throttled$"), Contender: re("^ratewise told")},
			want: []string{
				"bucket, throttled/throttled: ratewise told the limit",
				"bucket 50 workers, throttled/throttled: ratewise told the limit",
				"bucket 200 workers, throttled/throttled: ratewise told the limit",
			},
		},
		{
			name: "the cap, told",
			give: Filter{Scenario: re("^cap"), Contender: re("told")},
			want: []string{
				"cap, ratewisetest concurrency cap: ratewise told the limit, failsafe-go retry + bulkhead told the limit",
				"cap, go-chi/chi Throttle: ratewise told the limit, failsafe-go retry + bulkhead told the limit",
				"cap, nginx limit_conn: ratewise told the limit, failsafe-go retry + bulkhead told the limit",
			},
		},
		{
			// The Baseline comes first, selected or not.
			name: "the shedders, one peer",
			give: Filter{Scenario: re("^shed"), Contender: re("go-retryablehttp")},
			want: []string{
				"shed, ratewisetest load shedder, 429: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed, ratewisetest load shedder, 503: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, ratewisetest load shedder, 429: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, ratewisetest load shedder, 503: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, short backoff, ratewisetest load shedder, 429: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, short backoff, ratewisetest load shedder, 503: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, 200 calls, ratewisetest load shedder, 429: ratewise WithoutLearning(), go-retryablehttp defaults",
				"shed GETs, 200 calls, ratewisetest load shedder, 503: ratewise WithoutLearning(), go-retryablehttp defaults",
			},
		},
		{
			name: "the shedders, told: nothing to tell",
			give: Filter{Scenario: re("^shed"), Contender: re("told")},
		},
		{
			name: "the shedders, the Baseline alone",
			give: Filter{Scenario: re("^shed:"), Server: re("429"), Contender: re("WithoutLearning")},
			want: []string{"shed, ratewisetest load shedder, 429: ratewise WithoutLearning()"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, m := range Matchups(tt.give, false) {
				got = append(got, m.Scenario.Name+", "+m.API.Name+": "+strings.Join(names(m.Contenders), ", "))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Matchups = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRowsOfABaselinedTable(t *testing.T) {
	m := Matchups(Filter{Scenario: regexp.MustCompile("^shed"), Server: regexp.MustCompile("503"),
		Contender: regexp.MustCompile("defaults$")}, true)[0]
	var ideals []time.Duration
	walls := []time.Duration{2 * time.Second, 3 * time.Second, time.Second}
	rows := m.Rows(func(c Contender, ideal time.Duration) Result {
		ideals = append(ideals, ideal)
		return Result{Contender: c.Name, Wall: walls[len(ideals)-1], Ideal: ideal, Calls: 50, Refused: 25}
	})
	if want := []time.Duration{0, 2 * time.Second, 2 * time.Second}; !slices.Equal(ideals, want) {
		t.Errorf("rows run against ideals %v, want %v: none for the Baseline, then its wall time", ideals, want)
	}
	if rows[0].Ideal != 2*time.Second || rows[0].WallRatio() != 1 || rows[1].WallRatio() != 1.5 {
		t.Errorf("rows = %+v, want the Baseline's wall time as every row's ideal", rows)
	}
	var b strings.Builder
	Table(&b, m, rows)
	for _, want := range []string{
		"— ideal 2.00s, the wall time of ratewise WithoutLearning()\n",
		"| 503s per call |",
		"failed calls are the measure",
		"| ratewise WithoutLearning() | 2.00s | 1.00 | 0 | 0.500 | 0 |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Table =\n%s\nwant it to contain %q", b.String(), want)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f, err := ParseFilter("^window", "", "told")
	if err != nil {
		t.Fatal(err)
	}
	if !f.match(f.Scenario, "window 1s") || f.match(f.Scenario, "bucket") || !f.match(f.Server, "any") ||
		!f.match(f.Contender, "ratewise told the limit") || f.match(f.Contender, "ratewise defaults") {
		t.Errorf("ParseFilter(^window, \"\", told) = %v, want scenarios from window, any server, the told contenders", f)
	}
	if _, err := ParseFilter("", "(", ""); err == nil || !strings.Contains(err.Error(), "-server") {
		t.Errorf("ParseFilter with a bad -server = %v, want an error naming -server", err)
	}
}

// TestAwaitPhase: on loopback, a run against a server whose windows are
// aligned to the clock starts StartPhase into one of the clock's windows
// of the scenario's Window, as the runs in fake time do; against any
// other server it starts at once.
func TestAwaitPhase(t *testing.T) {
	for _, s := range []Scenario{{Window: time.Second}, {Window: 10 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			time.Sleep(time.Until(fakeStart.Add(4 * time.Second)))
			Matchup{Scenario: s, API: API{Model: FixedWindow}}.AwaitPhase(context.Background())
			if into := time.Since(time.Now().Truncate(s.Window)); into != StartPhase {
				t.Errorf("a window of %v: the run starts %v into one of the clock's, want %v", s.Window, into, StartPhase)
			}
			began := time.Now()
			Matchup{Scenario: s, API: API{Model: SlidingWindow}}.AwaitPhase(context.Background())
			if waited := time.Since(began); waited != 0 {
				t.Errorf("a sliding window: the run waited %v to start, want none", waited)
			}
		})
	}
}
