package redistest_test

import (
	"net/http"
	"testing"

	"github.com/ratewise/ratewise"
	rwredis "github.com/ratewise/ratewise/redis"
	"github.com/ratewise/ratewise/redis/redistest"
)

// testTwoReplicasShareALimit is a test of your own: two transports, as
// two replicas of a service, share one told limit through a real Redis
// that the test starts and stops.
func testTwoReplicasShareALimit(t *testing.T) {
	srv := redistest.Start(t) // a redis-server on a free 127.0.0.1 port, stopped when t ends
	store := rwredis.New(srv.Client(), rwredis.Options{})
	limit := ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 10, Burst: 1})
	a := ratewise.New(http.DefaultTransport, ratewise.WithStore(store), limit)
	b := ratewise.New(http.DefaultTransport, ratewise.WithStore(store), limit)
	_, _ = a, b // the two spend one budget of 10 a second
}

// A test starts its own redis-server with Start; the server is stopped
// and its data lost when the test ends.
func Example() {
	_ = testTwoReplicasShareALimit
}
