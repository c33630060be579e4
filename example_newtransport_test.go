package ratewise_test

import (
	"fmt"
	"net/http"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// NewTransport reports a misconfiguration where the transport is built,
// rather than at its first request; a valid one gives the transport.
func ExampleNewTransport() {
	for _, r := range []rate.Limit{-5, 10} {
		tr, err := ratewise.NewTransport(nil, ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: r}))
		if err != nil {
			fmt.Println(err)
			continue
		}
		client := &http.Client{Transport: tr}
		fmt.Println("ready:", client.Transport != nil)
	}
	// Output:
	// ratewise: Limit "api": Rate (-5) must not be negative
	// ready: true
}
