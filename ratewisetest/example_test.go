package ratewisetest_test

import (
	"fmt"
	"net/http"
	"strings"
	"time"

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

// A Model picks the kind of limit: here a window of two requests per
// hour that opens at a key's first request, and nginx's leaky bucket
// refusing with its bare 503 page.
func ExampleModel() {
	window := ratewisetest.NewBucket(ratewisetest.Config{
		Model: ratewisetest.FixedWindowFromFirst, Limit: 2, Window: time.Hour,
		PublishHeaders: true,
	})
	nginx := ratewisetest.NewBucket(ratewisetest.Config{
		Model: ratewisetest.LeakyBucket, Rate: 1, Burst: 1, NoDelay: true,
		RefusalStatus: http.StatusServiceUnavailable, HTMLRefusal: true,
	})
	for _, rt := range []http.RoundTripper{window, nginx} {
		client := &http.Client{Transport: rt}
		for range 3 {
			resp, err := client.Get("http://api.example.test/items")
			if err != nil {
				fmt.Println(err)
				return
			}
			resp.Body.Close()
			fmt.Printf("%s remaining=%q Retry-After=%q %s\n", resp.Status,
				resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"))
		}
	}
	// Output:
	// 200 OK remaining="1" Retry-After="" text/plain; charset=utf-8
	// 200 OK remaining="0" Retry-After="" text/plain; charset=utf-8
	// 429 Too Many Requests remaining="0" Retry-After="3600" application/json
	// 200 OK remaining="" Retry-After="" text/plain; charset=utf-8
	// 200 OK remaining="" Retry-After="" text/plain; charset=utf-8
	// 503 Service Unavailable remaining="" Retry-After="" text/html
}

// Ideal is the least time a batch takes against a limit: the yardstick
// for a client's pacing.
func ExampleConfig_Ideal() {
	for _, c := range []ratewisetest.Config{
		{Rate: 2, Burst: 10},
		{Model: ratewisetest.LeakyBucket, Rate: 2, Burst: 10},
		{Model: ratewisetest.FixedWindow, Limit: 30, Window: time.Minute},
		{Model: ratewisetest.SlidingWindow, Limit: 30, Window: time.Minute},
		{Model: ratewisetest.ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond},
	} {
		fmt.Printf("%v: 100 calls take at least %v\n", c.Model, c.Ideal(100))
	}
	// Output:
	// TokenBucket: 100 calls take at least 45s
	// LeakyBucket: 100 calls take at least 49.5s
	// FixedWindow: 100 calls take at least 3m0s
	// SlidingWindow: 100 calls take at least 3m18s
	// ConcurrencyCap: 100 calls take at least 1s
}

// A load shedder refuses a share of the requests whatever their rate,
// here 2 in 3 with 503 and no hint, drawn from a seeded stream: the same
// seed refuses the same requests on every run.
func ExampleModel_loadShed() {
	b := ratewisetest.NewBucket(ratewisetest.Config{
		Model: ratewisetest.LoadShed, Shed: 2.0 / 3,
		RefusalStatus: http.StatusServiceUnavailable,
	})
	client := &http.Client{Transport: b}
	for range 6 {
		resp, err := client.Post("http://api.example.test/items", "application/json", strings.NewReader(`{"name":"a"}`))
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status, "Retry-After:", resp.Header.Values("Retry-After"))
	}
	fmt.Printf("%+v\n", b.Stats())
	// Output:
	// 503 Service Unavailable Retry-After: []
	// 200 OK Retry-After: []
	// 200 OK Retry-After: []
	// 503 Service Unavailable Retry-After: []
	// 503 Service Unavailable Retry-After: []
	// 503 Service Unavailable Retry-After: []
	// {Received:6 Admitted:2 Limited:4 Faults:0}
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
