package composite_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jarcoal/httpmock"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/composite"
	"github.com/ratewise/ratewise/ratewisetest"
)

// Read an order, then its lines and its notes in parallel, under one
// minute of waiting in all. The notes fail; the order and its lines come
// back all the same.
func ExampleRun() {
	mock := httpmock.NewMockTransport()
	mock.RegisterResponder("GET", "https://shop.example.com/orders/7", httpmock.NewStringResponder(200, "order 7"))
	mock.RegisterResponder("GET", "https://shop.example.com/orders/7/lines",
		ratewisetest.RateLimitedThen(1, "0", httpmock.NewStringResponder(200, "3 lines")))
	mock.RegisterResponder("GET", "https://shop.example.com/orders/7/notes", httpmock.NewStringResponder(500, ""))
	client := &http.Client{Transport: ratewise.New(mock, ratewise.WithRetry(ratewise.RetryPolicy{InitialDelay: time.Millisecond}))}

	get := func(path string, into *string) func(context.Context) error {
		return func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://shop.example.com"+path, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			b, err := io.ReadAll(resp.Body)
			*into = string(b)
			return err
		}
	}
	var order, lines, notes string
	res, err := composite.Run(context.Background(),
		composite.Branch{Name: "order", Call: get("/orders/7", &order)},
		[]composite.Branch{
			{Name: "lines", Call: get("/orders/7/lines", &lines)},
			{Name: "notes", Call: get("/orders/7/notes", &notes)},
		},
		composite.Options{Budget: time.Minute})
	fmt.Println("error:", err)
	fmt.Printf("%q, %q\n", order, lines)
	for _, o := range res.Branches {
		fmt.Printf("%s: completed %v after %d attempts, %d rate-limited, err %v\n", o.Name, o.Completed, o.Attempts, o.RateLimitHits, o.Err)
	}
	// Output:
	// error: <nil>
	// "order 7", "3 lines"
	// order: completed true after 1 attempts, 0 rate-limited, err <nil>
	// lines: completed true after 2 attempts, 1 rate-limited, err <nil>
	// notes: completed false after 5 attempts, 0 rate-limited, err status 500
}
