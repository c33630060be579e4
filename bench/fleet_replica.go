package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/ratewise/ratewise"
	rwredis "github.com/ratewise/ratewise/redis"
	"github.com/ratewise/ratewise/store"
)

// A fleet replica is the running binary started again by [RunFleet] with
// replicaEnv set to its replicaSpec: a binary that runs fleets calls
// [RunFleetReplica] first thing when [IsFleetReplica] says it is one.

// replicaEnv holds a replica's replicaSpec, as JSON.
const replicaEnv = "RATEWISE_BENCH_FLEET_REPLICA"

// replicaSpec is what a replica is told: whom to call, how, and when.
type replicaSpec struct {
	Scenario  Scenario
	Contender FleetContender
	URL       string
	// Redis is the address of the Redis the fleet shares: the store's,
	// when the contender has one, and always the counter the calls are
	// dealt from.
	Redis, Prefix, DealKey string
	// Workers are the replica's goroutines making calls.
	Workers int
	// Start is when every replica starts calling, in Unix nanoseconds.
	Start int64
}

// ReplicaReport is what a replica did, as it prints it. Times are Unix
// nanoseconds; FirstStart and LastEnd are zero when it made no call.
type ReplicaReport struct {
	// Calls are the calls it made.
	Calls int `json:"calls"`
	// Failed are those of them that did not end in a 200.
	Failed     int   `json:"failed"`
	FirstStart int64 `json:"first_start"`
	LastEnd    int64 `json:"last_end"`
	// Ready is when it was ready to call: after Start, it started late.
	Ready int64 `json:"ready"`
	// Cut says the scenario's deadline ended its calls.
	Cut bool `json:"cut"`
}

// IsFleetReplica reports whether this process is a fleet replica, which
// must run [RunFleetReplica] rather than what the binary does otherwise.
func IsFleetReplica() bool { return os.Getenv(replicaEnv) != "" }

// RunFleetReplica runs the replica this process was started as, prints its
// [ReplicaReport] to stdout as JSON, and returns the exit code: non-zero,
// with the reason on stderr, when it could not make its calls.
func RunFleetReplica(stdout io.Writer) int {
	var spec replicaSpec
	if err := json.Unmarshal([]byte(os.Getenv(replicaEnv)), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "fleet replica: %s is not a replica's spec: %v\n", replicaEnv, err)
		return 2
	}
	report, err := spec.run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet replica:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(report); err != nil {
		fmt.Fprintln(os.Stderr, "fleet replica:", err)
		return 1
	}
	return 0
}

// run makes the replica's calls: from Start on, each of its workers takes
// the next call from the counter in Redis that the fleet's replicas share,
// until the fleet has taken the scenario's calls or the deadline has come.
func (spec replicaSpec) run() (ReplicaReport, error) {
	s := spec.Scenario
	rdb := redisClient(spec.Redis)
	defer rdb.Close()
	// A connection made now, not at the first call.
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		return ReplicaReport{}, fmt.Errorf("the Redis at %s: %w", spec.Redis, err)
	}
	var shared store.Store
	if spec.Contender.Store {
		shared = rwredis.New(rdb, rwredis.Options{Prefix: spec.Prefix})
	}
	base := loopbackTransport(spec.Workers)
	tr := spec.Contender.transport(base, s, shared)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	start := time.Unix(0, spec.Start)
	report := ReplicaReport{Ready: time.Now().UnixNano()}
	time.Sleep(time.Until(start))
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(s.Deadline()))
	defer cancel()
	url := spec.URL + "/items"
	var mu sync.Mutex
	var dealErr error // guarded by mu
	var wg sync.WaitGroup
	for range spec.Workers {
		wg.Go(func() {
			for {
				n, err := rdb.Incr(ctx, spec.DealKey).Result()
				if err != nil {
					mu.Lock()
					if ctx.Err() == nil && dealErr == nil {
						dealErr = fmt.Errorf("taking a call from %s in Redis: %w", spec.DealKey, err)
					}
					mu.Unlock()
					return
				}
				if n > int64(s.Calls) {
					return
				}
				began := time.Now().UnixNano()
				ok := call(ctx, client, url, s.Body)
				ended := time.Now().UnixNano()
				mu.Lock()
				report.Calls++
				if !ok {
					report.Failed++
				}
				if report.FirstStart == 0 || began < report.FirstStart {
					report.FirstStart = began
				}
				report.LastEnd = max(report.LastEnd, ended)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	report.Cut = ctx.Err() != nil
	return report, dealErr
}

// transport is the contender's client of one replica, over base, for s,
// sharing through st when it has a store.
func (c FleetContender) transport(base http.RoundTripper, s Scenario, st store.Store) *ratewise.Transport {
	var opts []ratewise.Option
	if c.Store {
		opts = append(opts, ratewise.WithStore(st))
	}
	if c.Told {
		opts = append(opts, ratewise.WithLimit(toldLimit(s)))
	}
	return ratewise.New(base, opts...)
}
