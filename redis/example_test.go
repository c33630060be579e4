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

// Three replicas of a service given the same store hold one limit of 20
// requests a second together, pause together when the API asks, and trip
// one breaker.
func ExampleNew() {
	// ContextTimeoutEnabled lets the store's timeout end a call that Redis
	// does not answer.
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store := rwredis.New(client, rwredis.Options{Prefix: "myservice:"})

	// WithStore shares the limit's bucket, the pauses and the breaker.
	tr := ratewise.New(http.DefaultTransport, ratewise.WithStore(store),
		ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 20, Burst: 5}),
		ratewise.WithBreaker(ratewise.BreakerPolicy{}),
	)
	httpClient := &http.Client{Transport: tr}
	_ = httpClient // make calls as usual

	l := tr.Limits()[0]
	fmt.Printf("%s: %v/s, burst %d, shared: %v\n", l.Name, float64(l.Rate), l.Burst, l.Store == store)
	// Output:
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
