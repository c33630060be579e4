package redis_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	rwredis "github.com/ratewise/ratewise/redis"
)

// Replicas of a service given the same store learn each API's limit as
// one client; told a limit, they hold it together (20 requests a second),
// pause together when the API asks, and trip one breaker. docs/fleets.md
// and the package doc show this code.
func ExampleNew() {
	// ContextTimeoutEnabled: go-redis ends a call at the store's 200 ms timeout.
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store := rwredis.New(client,
		rwredis.Options{Prefix: "myservice:"}) // OnFailure: rwredis.FailClosed to never go over
	tr := ratewise.New(http.DefaultTransport, ratewise.WithStore(store)) // the fleet learns as one
	httpClient := &http.Client{Transport: tr}
	_ = httpClient // make calls as usual

	told := ratewise.New(http.DefaultTransport,
		ratewise.WithStore(store),
		ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 5}), // 20/s for the fleet
		ratewise.WithBreaker(ratewise.BreakerPolicy{}),                      // one breaker, one probe, survives restarts
	)

	learned, l := tr.Limits()[0], told.Limits()[0]
	fmt.Printf("%s: adaptive: %v\n", learned.Name, learned.Adaptive)
	fmt.Printf("%s: %v/s, burst %d, shared: %v\n", l.Name, float64(l.Rate), l.Burst, l.Store == store)
	// Output:
	// learned: adaptive: true
	// api: 20/s, burst 5, shared: true
}

// While Redis does not answer, a FallbackLocal store lets each transport go
// on with its own state, and counts the outage; a FailClosed one makes the
// transport refuse the request.
func ExampleOptions_onFailure() {
	// Nothing listens on port 1: every call fails at once.
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	fallback := rwredis.New(client, rwredis.Options{})
	closed := rwredis.New(client, rwredis.Options{OnFailure: rwredis.FailClosed})

	_, err := fallback.Take(context.Background(), "api", 1, 20, 5, 0)
	fmt.Println("fallback fails closed:", errors.Is(err, ratewise.ErrStoreUnavailable), "outages:", fallback.Outages())
	_, err = closed.Take(context.Background(), "api", 1, 20, 5, 0)
	fmt.Println("fail-closed fails closed:", errors.Is(err, ratewise.ErrStoreUnavailable))

	// Output:
	// fallback fails closed: false outages: 1
	// fail-closed fails closed: true
}
