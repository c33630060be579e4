package bench

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Filter selects scenarios, servers and contenders: each regexp, when
// set, must match the scenario's description, the server's name or the
// contender's name.
type Filter struct {
	Scenario, Server, Contender *regexp.Regexp
}

func (f Filter) match(re *regexp.Regexp, s string) bool { return re == nil || re.MatchString(s) }

// ParseFilter is the Filter of three regexps, as the commands' -scenario,
// -server and -contender flags give them; an empty one matches all.
func ParseFilter(scenario, server, contender string) (Filter, error) {
	var f Filter
	for _, p := range []struct {
		re   **regexp.Regexp
		flag string
		expr string
	}{{&f.Scenario, "scenario", scenario}, {&f.Server, "server", server}, {&f.Contender, "contender", contender}} {
		re, err := regexp.Compile(p.expr)
		if err != nil {
			return Filter{}, fmt.Errorf("-%s: %w", p.flag, err)
		}
		*p.re = re
	}
	return f, nil
}

// Baseline is the contender whose run is the yardstick of a table
// against a load shedder: such a server sets no pace, so the least time
// its calls take is no property of the server. The Baseline runs first,
// whatever the filter, and its wall time is the ideal of every row;
// failed calls are the measure there.
const Baseline = "ratewise WithoutLearning()"

// Matchup is one table: a scenario, a server and the contenders that run
// it against the server.
type Matchup struct {
	Scenario   Scenario
	API        API
	Contenders []Contender
}

// Baselined reports whether m's rows are measured against the wall time
// of its first row, the [Baseline]'s, rather than the server's ideal.
func (m Matchup) Baselined() bool { return m.Scenario.Kind() == Shedding }

// StartPhase is how far into one of the clock's windows of the
// scenario's Window each run starts: the part of its first window a
// server whose windows are aligned to the clock (FixedWindow) has spent,
// which the ideal does not count. The in-process runs start there in
// fake time (0.37 s past a whole second, a whole 10 s); on loopback,
// AwaitPhase waits for it, so that every row of a table, and of a run in
// fake time, starts its first window alike.
const StartPhase = 370 * time.Millisecond

// AwaitPhase waits until StartPhase past a multiple of the scenario's
// Window, when the server aligns its windows to the clock; at once for
// any other, or when ctx is done.
func (m Matchup) AwaitPhase(ctx context.Context) {
	w := m.Scenario.Window
	if m.API.Model != FixedWindow || w <= 0 {
		return
	}
	now := time.Now()
	at := now.Truncate(w).Add(StartPhase)
	if !at.After(now) {
		at = at.Add(w)
	}
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Matchups are the tables f selects, in order: each scenario against each
// server that fits it, with every contender that may run it (a fleet and
// a load shedder leave out those told the limit, and a contender runs
// only the kinds of limit it has a form for). A table measured against
// its Baseline has it first, selected or not. inProcess leaves out the
// servers that cannot run in fake time.
func Matchups(f Filter, inProcess bool) []Matchup {
	var all []Matchup
	for _, s := range Scenarios() {
		if !f.match(f.Scenario, s.String()) {
			continue
		}
		for _, api := range APIs() {
			if !api.Fits(s) || !f.match(f.Server, api.Name) || inProcess && api.InProcess == nil {
				continue
			}
			m := Matchup{Scenario: s, API: api}
			m.Scenario.Model = api.Model
			var baseline *Contender
			for _, c := range Contenders() {
				switch {
				case !c.runs(s):
				case c.Name == Baseline && m.Baselined():
					baseline = &c
				case f.match(f.Contender, c.Name):
					m.Contenders = append(m.Contenders, c)
				}
			}
			if baseline != nil && (len(m.Contenders) > 0 || f.match(f.Contender, baseline.Name)) {
				m.Contenders = slices.Insert(m.Contenders, 0, *baseline)
			}
			if len(m.Contenders) > 0 {
				all = append(all, m)
			}
		}
	}
	return all
}

// runs reports whether c runs against the limit of s.
func (c Contender) runs(s Scenario) bool {
	if c.Told && s.untold() {
		return false
	}
	return c.Kinds == nil || slices.Contains(c.Kinds, s.Kind())
}

// Rows makes the rows of m's table, one per contender in order, each with
// run, which runs c against a fresh server and reports it against ideal.
// In a Baselined table the first row's wall time is the ideal of every
// row, its own included.
func (m Matchup) Rows(run func(c Contender, ideal time.Duration) Result) []Result {
	ideal := m.API.Ideal(m.Scenario)
	rows := make([]Result, 0, len(m.Contenders))
	for i, c := range m.Contenders {
		r := run(c, ideal)
		if i == 0 && m.Baselined() {
			ideal, r.Ideal = r.Wall, r.Wall
		}
		rows = append(rows, r)
	}
	return rows
}

// Table writes the rows of m as a Markdown table, under a heading and a
// line saying how the server limits and refuses.
func Table(w io.Writer, m Matchup, rows []Result) {
	s, api := m.Scenario, m.API
	if m.Baselined() {
		ideal := time.Duration(0)
		if len(rows) > 0 {
			ideal = rows[0].Ideal
		}
		fmt.Fprintf(w, "### %s — %s — ideal %.2fs, the wall time of %s\n\n", s, api.Title(), ideal.Seconds(), Baseline)
		fmt.Fprintf(w, "%s. Refuses with %s. It sets no pace: the ideal is the wall time of %s, run first, and failed calls are the measure.\n\n",
			api.Describe(s), api.Refusal, Baseline)
	} else {
		fmt.Fprintf(w, "### %s — %s — ideal %.2fs\n\n", s, api.Title(), api.Ideal(s).Seconds())
		fmt.Fprintf(w, "%s. Refuses with %s.\n\n", api.Describe(s), api.Refusal)
	}
	writeColumns(w, api, "p50", "p99")
	for _, r := range rows {
		writeCells(w, r, round(r.P50), round(r.P99))
	}
	fmt.Fprintln(w)
}

// writeColumns writes the head of a table of results: the columns every
// such table has, then more.
func writeColumns(w io.Writer, api API, more ...string) {
	fmt.Fprintf(w, "| client | wall | wall / ideal | requests | %ds per call | failed calls |", api.refusalStatus())
	for _, c := range more {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n|---|---|---|---|---|---|%s\n", strings.Repeat("---|", len(more)))
}

// writeCells writes r's row under writeColumns' head, more its cells in
// the columns more.
func writeCells(w io.Writer, r Result, more ...string) {
	cut := ""
	if r.Cut {
		cut = " (cut)"
	}
	ratio := "–"
	if r.Ideal > 0 {
		ratio = fmt.Sprintf("%.2f", r.WallRatio())
	}
	fmt.Fprintf(w, "| %s | %.2fs%s | %s | %d | %.3f | %d |", r.Contender, r.Wall.Seconds(), cut,
		ratio, r.Received, r.RefusedPerCall(), r.Failed)
	for _, c := range more {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintln(w)
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}
