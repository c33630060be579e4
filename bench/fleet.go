package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// A fleet run is the fleet scenarios of [Scenarios] played by OS
// processes rather than clients in one process: each replica is its own
// process with its own transport, the replicas share state only through
// one real redis-server, and they call one server on loopback that this
// process runs and counts (see cmd/fleet).

// FleetContender is a ratewise client as each replica of a fleet builds
// it: with or without a store in the fleet's Redis, told the server's
// limit or not.
type FleetContender struct {
	Name string
	// Store says the replicas share their state through the Redis store
	// (ratewise.WithStore).
	Store bool
	// Told says each replica is told the server's whole limit, as its
	// documentation states it (see toldLimit).
	Told bool
}

// FleetContenders are the clients a fleet runs: learning the limit or
// told it, each with and without the store. A replica told the limit is
// told the whole of it, as a user reads it in the documentation: each
// told its share is not what a user does, and no replica knows how many
// others there are.
func FleetContenders() []FleetContender {
	return []FleetContender{
		{Name: "learned, WithStore", Store: true},
		{Name: "learned, no store"},
		{Name: "told, WithStore", Store: true, Told: true},
		{Name: "told, no store", Told: true},
	}
}

// FleetMatchup is one fleet table: a fleet scenario, a server on
// loopback that fits it, and the contenders that run it.
type FleetMatchup struct {
	Scenario   Scenario
	API        API
	Contenders []FleetContender
}

// FleetMatchups are the fleet tables f selects, in order: each fleet
// scenario of a bucket or a window against each server that fits it and
// runs on loopback, with the contenders f selects.
func FleetMatchups(f Filter) []FleetMatchup {
	var all []FleetMatchup
	for _, s := range Scenarios() {
		if s.replicas() < 2 || s.Kind() != Bucket && s.Kind() != Window || !f.match(f.Scenario, fleetString(s)) {
			continue
		}
		for _, api := range APIs() {
			if !api.Fits(s) || api.Loopback == nil || !f.match(f.Server, api.Name) {
				continue
			}
			m := FleetMatchup{Scenario: s, API: api}
			m.Scenario.Model = api.Model
			for _, c := range FleetContenders() {
				if f.match(f.Contender, c.Name) {
					m.Contenders = append(m.Contenders, c)
				}
			}
			if len(m.Contenders) > 0 {
				all = append(all, m)
			}
		}
	}
	return all
}

// String describes m's scenario as a fleet of processes, such as
// "fleet: 50/s burst 10, 4 processes of 5 workers, 500 calls".
func (m FleetMatchup) String() string { return fleetString(m.Scenario) }

func fleetString(s Scenario) string {
	return fmt.Sprintf("%s: %s, %d processes of %d workers, %d calls", s.Name, s.limit(), s.replicas(), s.Workers/s.replicas(), s.Calls)
}

// FleetResult is a fleet run: its row, and what each replica reported.
type FleetResult struct {
	Result
	Replicas []ReplicaReport
	// Late is how long after the common start the last replica was ready
	// to call; zero when every one was ready in time.
	Late time.Duration
}

// replicaStartup is how long the replicas of a fleet of n are given to
// start and get ready before they all start calling; a replica later
// than that says so (FleetResult.Late).
func replicaStartup(n int) time.Duration {
	return 300*time.Millisecond + time.Duration(n)*50*time.Millisecond
}

// replicaGrace is how long past the scenario's deadline a replica may take
// to print its report before it is killed.
const replicaGrace = 30 * time.Second

// RunFleet runs s as a fleet of s.Replicas processes, each this binary
// started again as a fleet replica (see [IsFleetReplica]) with its share
// of s.Workers and its own client of c, against srv, sharing state
// through the Redis at redisAddr, which it empties first. The calls are
// dealt from a counter in that Redis, so that a replica that finishes its
// calls sooner takes more, as the workers of [Run] take theirs from one
// channel. The wall time runs from the instant every replica starts
// calling to the last answer; calls not made by the deadline count as
// failed.
func RunFleet(ctx context.Context, redisAddr string, s Scenario, c FleetContender, srv Server, ideal time.Duration) (FleetResult, error) {
	rdb := redisClient(redisAddr)
	err := rdb.FlushAll(ctx).Err()
	_ = rdb.Close()
	if err != nil {
		return FleetResult{}, fmt.Errorf("emptying the Redis at %s: %w", redisAddr, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return FleetResult{}, err
	}
	n := s.replicas()
	start := time.Now().Add(replicaStartup(n))
	ctx, cancel := context.WithDeadline(ctx, start.Add(s.Deadline()+replicaGrace))
	defer cancel() // kills any replica still running
	spec, err := json.Marshal(replicaSpec{Scenario: s, Contender: c, URL: srv.URL(), Redis: redisAddr,
		Prefix: "ratewise:", DealKey: "bench:dealt", Workers: s.Workers / n, Start: start.UnixNano()})
	if err != nil {
		return FleetResult{}, err
	}
	cmds := make([]*exec.Cmd, 0, n)
	outs := make([]bytes.Buffer, n)
	var errs []error
	for i := range n {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), replicaEnv+"="+string(spec))
		cmd.Stdout, cmd.Stderr = &outs[i], os.Stderr
		if err := cmd.Start(); err != nil {
			errs = append(errs, fmt.Errorf("starting replica %d: %w", i, err))
			cancel()
			break
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("replica %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return FleetResult{}, err
	}
	r := FleetResult{Result: Result{Contender: c.Name, Ideal: ideal, Calls: s.Calls}}
	made, last := 0, start
	for i := range cmds {
		var rep ReplicaReport
		if err := json.Unmarshal(outs[i].Bytes(), &rep); err != nil {
			return FleetResult{}, fmt.Errorf("replica %d printed %q: %w", i, outs[i].String(), err)
		}
		r.Replicas = append(r.Replicas, rep)
		made += rep.Calls
		r.Failed += rep.Failed
		r.Cut = r.Cut || rep.Cut
		if end := time.Unix(0, rep.LastEnd); rep.Calls > 0 && end.After(last) {
			last = end
		}
		r.Late = max(r.Late, time.Unix(0, rep.Ready).Sub(start))
	}
	r.Failed += s.Calls - made
	r.Wall = last.Sub(start)
	r.Received, r.Refused = srv.Stats()
	return r, nil
}

// FleetTable writes the rows of m as a Markdown table, under a heading and
// a line saying how the server limits and refuses.
func FleetTable(w io.Writer, m FleetMatchup, rows []FleetResult) {
	s, api := m.Scenario, m.API
	fmt.Fprintf(w, "### %s — %s — ideal %.2fs\n\n", m, api.Title(), api.Ideal(s).Seconds())
	fmt.Fprintf(w, "%s. Refuses with %s.\n\n", api.Describe(s), api.Refusal)
	writeColumns(w, api)
	for _, r := range rows {
		writeCells(w, r.Result)
	}
	fmt.Fprintln(w)
}
