package ratewisetest_test

import (
	"fmt"
	"net/http"

	"github.com/jarcoal/httpmock"

	"github.com/ratewise/ratewise/ratewisetest"
)

func ExampleNewServer() {
	s := ratewisetest.NewServer(ratewisetest.Config{Rate: 1, Burst: 2})
	defer s.Close()

	for range 3 {
		resp, err := s.Client().Get(s.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Println(resp.Status, "Retry-After:", ra)
			continue
		}
		fmt.Println(resp.Status)
	}
	fmt.Printf("%+v\n", s.Stats())
	// Output:
	// 200 OK
	// 200 OK
	// 429 Too Many Requests Retry-After: 1
	// {Received:3 Admitted:2 Limited:1 Faults:0}
}

// A Bucket is the same API with no network: put it under the client in a
// testing/synctest bubble, and a batch of many seconds runs at once.
func ExampleNewBucket() {
	b := ratewisetest.NewBucket(ratewisetest.Config{Rate: 1, Burst: 2, PublishHeaders: true})
	client := &http.Client{Transport: b}

	for range 3 {
		resp, err := client.Get("http://api.example.test/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status, "remaining:", resp.Header.Get("X-RateLimit-Remaining"))
	}
	fmt.Printf("%+v\n", b.Stats())
	// Output:
	// 200 OK remaining: 1
	// 200 OK remaining: 0
	// 429 Too Many Requests remaining: 0
	// {Received:3 Admitted:2 Limited:1 Faults:0}
}

func ExampleRateLimitedThen() {
	mt := httpmock.NewMockTransport()
	mt.RegisterResponder(http.MethodGet, "https://api.example.test/items",
		ratewisetest.RateLimitedThen(2, "3", httpmock.NewStringResponder(200, "[]")))
	client := &http.Client{Transport: mt}

	for range 3 {
		resp, err := client.Get("https://api.example.test/items")
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Values("Retry-After"))
	}
	// Output:
	// 429 [3]
	// 429 [3]
	// 200 []
}
