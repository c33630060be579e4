package redis

import (
	"context"
	"crypto/sha1"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	breakers "github.com/ratewise/ratewise/internal/breaker"
	"github.com/ratewise/ratewise/redis/redistest"
)

// roundTrips counts the round trips a client makes to Redis: each command
// sent alone is one, and so is each pipeline. It keeps what each was, for
// a failure to show.
type roundTrips struct {
	n     atomic.Int64
	mu    sync.Mutex
	names []string
}

func (r *roundTrips) note(name string) {
	r.n.Add(1)
	r.mu.Lock()
	r.names = append(r.names, name)
	r.mu.Unlock()
}

// since returns what was sent from the n-th round trip on.
func (r *roundTrips) since(n int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.names[min(int(n), len(r.names)):])
}

func (*roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		// A cluster client reloads its slots now and then (CLUSTER SLOTS,
		// sooner on a loaded machine): go-redis's own, not a call's.
		switch args := cmd.Args(); {
		case cmd.Name() == "cluster":
		case cmd.Name() == "eval" && len(args) > 1: // a script sent whole, on its first use: named by its hash
			r.note(fmt.Sprintf("evalsha %x", sha1.Sum([]byte(fmt.Sprint(args[1])))))
		default:
			r.note(cmd.Name() + " " + fmt.Sprint(args[1:min(2, len(args))]...))
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		names := make([]string, len(cmds))
		for i, c := range cmds {
			names[i] = c.Name()
		}
		r.note("pipeline " + strings.Join(names, ","))
		return next(ctx, cmds)
	}
}

// TestRoundTripsPerCall counts, with a go-redis hook, the round trips to
// Redis of a call that needs no help (answered 200 at once, nothing
// paused, no breaker tripped) through a transport that shares its state
// through WithStore, for each combination of what it shares: one, for
// the breaker, the pause, the told bucket and the fleet's learned pace
// asked together. A success clears the failures other transports counted
// while it was in flight with the next admission, which tells it.
func TestRoundTripsPerCall(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	hook := &roundTrips{}
	client.AddHook(hook)
	roundTripsPerCall(t, client, hook)
}

// roundTripsPerCall counts, with hook on client, the round trips a call
// that needs no help makes, for each combination of what a transport
// shares: one, every time.
func roundTripsPerCall(t *testing.T, client goredis.UniversalClient, hook *roundTrips) {
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer api.Close()
	told := ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 1e6, Burst: 1e6})
	breaker := ratewise.WithBreaker(ratewise.BreakerPolicy{})
	for _, tc := range []struct {
		name string
		opts []ratewise.Option
		want int64
	}{
		{"told, pause", []ratewise.Option{ratewise.WithoutLearning(), told}, 1},
		{"told, pause, breaker", []ratewise.Option{ratewise.WithoutLearning(), told, breaker}, 1},
		{"learned, pause", nil, 1},
		{"learned, pause, breaker", []ratewise.Option{breaker}, 1},
		{"told, learned, pause, breaker", []ratewise.Option{told, breaker}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := New(client, Options{Prefix: "rt-" + t.Name() + ":"})
			tr := ratewise.New(http.DefaultTransport, append([]ratewise.Option{ratewise.WithStore(store)}, tc.opts...)...)
			defer tr.CloseIdleConnections()
			if err := get(tr, api.URL); err != nil { // loads the scripts
				t.Fatal(err)
			}
			const calls = 20
			before := hook.n.Load()
			slow := 0 // calls a loaded machine stretched near breakers.UnsaidFor
			last := time.Now()
			for range calls {
				if err := get(tr, api.URL); err != nil {
					t.Fatal(err)
				}
				now := time.Now()
				if now.Sub(last) >= breakers.UnsaidFor/2 {
					slow++
				}
				last = now
			}
			// A success is told with the next admission, or by itself
			// after breakers.UnsaidFor: a call slow enough to leave it
			// unsaid that long may add that round trip (and its script's
			// first sending).
			sent := hook.since(before)
			told, dialed := 0, false
			for _, name := range sent {
				switch {
				case name == "evalsha "+breakerSucceededScript.Hash():
					told++
				case strings.HasPrefix(name, "hello "), strings.HasPrefix(name, "pipeline client"):
					// go-redis dialed a connection anew (its handshake): a
					// call that met it waited on the dial.
					dialed = true
				}
			}
			if dialed {
				slow++
			}
			handshakes := 0
			for _, name := range sent {
				if strings.HasPrefix(name, "hello ") || strings.HasPrefix(name, "pipeline client") {
					handshakes++
				}
			}
			per := float64(len(sent)-told-handshakes) / calls
			t.Logf("%s: %.2f round trips a call, and %d successes told alone after %d slow calls", tc.name, per, told, slow)
			if per != float64(tc.want) || told > 2*slow {
				t.Errorf("%s: %.2f round trips a call, want %d, and %d successes told alone after %d slow calls: %q", tc.name, per, tc.want, told, slow, sent)
			}
			// The last success is told alone breakers.UnsaidFor later: let
			// it be, before the next case counts what the client sends.
			time.Sleep(2 * breakers.UnsaidFor)
		})
	}
}
