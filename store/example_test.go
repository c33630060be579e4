package store_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/store"
)

// countingStore is a store written on top of another: it counts the turns
// the transport takes from its buckets. A store of its own (a database, a
// coordination service) implements the same three interfaces.
type countingStore struct {
	store.Store
	takes int
}

func (s *countingStore) Take(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, error) {
	s.takes++
	return s.Store.Take(ctx, key, n, r, burst, maxWait)
}

// A store is written against this package and given to the transport with
// ratewise.WithStore; its user never reads this package.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()

	s := &countingStore{Store: ratewise.NewMemoryStore()}
	client := &http.Client{Transport: ratewise.New(nil,
		ratewise.WithStore(s),
		ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: 100, Burst: 10}))}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	fmt.Println("turns taken from the store:", s.takes)
	// Output: turns taken from the store: 3
}
