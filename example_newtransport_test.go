package ratewise_test

import (
	"fmt"
	"net/http"

	"github.com/ratewise/ratewise"
)

// NewTransport reports a misconfiguration where the transport is built,
// rather than at its first request.
func ExampleNewTransport() {
	tr, err := ratewise.NewTransport(nil, ratewise.WithLimit(ratewise.Limit{Name: "api", Rate: -5}))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: tr}
	fmt.Println("ready:", client.Transport != nil)
	// Output: ratewise: Limit "api": Rate (-5) must not be negative
}
