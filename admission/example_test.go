package admission_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/admission"
)

// The ADR's limits: 10 requests a minute per client IP, 5 at once, and
// 100 a minute in all, 20 at once. The sixth request of a client in a row
// is refused, told to come back in 6 s.
func Example() {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	h, err := admission.New(api,
		admission.WithLimit(admission.Limit{Name: "ip", Rate: rate.Every(6 * time.Second), Burst: 5}),
		admission.WithLimit(admission.Limit{Name: "global", Rate: rate.Every(600 * time.Millisecond), Burst: 20, Key: ratewise.Global}),
		admission.WithExemptPaths("/health"))
	if err != nil {
		panic(err)
	}
	for i := 1; i <= 6; i++ {
		req := httptest.NewRequest(http.MethodGet, "/items", nil)
		req.RemoteAddr = "192.0.2.1:40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Printf("%d: %d RateLimit: %s\n", i, rec.Code, rec.Header().Get("RateLimit"))
		if rec.Code == http.StatusTooManyRequests {
			fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
			fmt.Println("Retry-After:", rec.Header().Get("Retry-After"))
			fmt.Print(rec.Body)
		}
	}
	// Output:
	// 1: 200 RateLimit: "ip";r=4;t=6, "global";r=19;t=1
	// 2: 200 RateLimit: "ip";r=3;t=12, "global";r=18;t=2
	// 3: 200 RateLimit: "ip";r=2;t=18, "global";r=17;t=2
	// 4: 200 RateLimit: "ip";r=1;t=24, "global";r=16;t=3
	// 5: 200 RateLimit: "ip";r=0;t=30, "global";r=15;t=3
	// 6: 429 RateLimit: "ip";r=0;t=30, "global";r=15;t=3
	// RateLimit-Policy: "ip";q=5;w=30, "global";q=20;w=12
	// Retry-After: 6
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"The request exceeds the rate limit; retry in 6 s.","violated-policies":["ip"],"retry-after":6}
}

// handlerTransport serves each request with a handler in the caller's
// goroutine, as from one client address: a server without a network.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	in := req.Clone(req.Context())
	in.RemoteAddr, in.RequestURI = "192.0.2.1:40000", req.URL.RequestURI()
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, in)
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// A ratewise client with its defaults, not told the limit, against a
// server limited by admission: from the server's first answer on, it
// paces itself by the counts the server publishes, and no request is
// refused. The ADR's per-IP limit runs six times faster here, 1 a second
// (5 at once), so that 7 calls take 2 s.
func Example_ratewiseClient() {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	h, err := admission.New(api,
		admission.WithLimit(admission.Limit{Name: "ip", Rate: 1, Burst: 5}),
		admission.WithLimit(admission.Limit{Name: "global", Rate: 10, Burst: 20, Key: ratewise.Global}))
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: ratewise.New(handlerTransport{h})}

	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		wg       sync.WaitGroup
	)
	for range 7 {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://api.example/items", nil)
			resp, err := client.Do(req)
			if err != nil {
				panic(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	st := h.Stats()
	fmt.Printf("answered 200: %d, refused: %d\n", statuses[http.StatusOK], st.Refused)
	// Output:
	// answered 200: 7, refused: 0
}

// The limiter as a router's middleware (chi's r.Use takes this shape),
// with a refusal written as plain text instead of a problem document.
func ExampleNewMiddleware() {
	use, limiter, err := admission.NewMiddleware(
		admission.WithLimit(admission.Limit{Name: "ip", Rate: rate.Every(time.Minute), Burst: 1}),
		admission.WithRefusalResponse(func(w http.ResponseWriter, _ *http.Request, r admission.Refusal) {
			w.WriteHeader(r.Status)
			fmt.Fprintf(w, "over the %s limit, come back in %v\n", r.Scopes[0], r.RetryAfter.Round(time.Second))
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/cards", use(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "cards\n") })))
	for range 2 {
		req := httptest.NewRequest(http.MethodGet, "http://api.test/cards", nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	fmt.Println("admitted", limiter.Stats().Admitted)
	// Output:
	// 200 cards
	// 429 over the ip limit, come back in 1m0s
	// admitted 1
}

// A service behind its load balancers (10.0.0.0/8): each client's IP,
// as the balancer saw it, has 10 requests a minute, 5 at once; the fleet
// has 100 a minute in all, and a request waits up to 10 s for the fleet's
// turn rather than be refused. A client that writes X-Forwarded-For
// itself, with no trusted proxy in between, is counted by its own
// address; the health check is never limited.
func ExampleWithClientIP() {
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	store := ratewise.NewMemoryStore() // between processes, the redis module's store

	h, err := admission.New(api,
		admission.WithLimit(admission.Limit{Name: "ip", Rate: rate.Every(6 * time.Second), Burst: 5}), // 10/min per client IP
		admission.WithLimit(admission.Limit{Name: "global", Rate: rate.Every(600 * time.Millisecond), Burst: 20,
			Key: ratewise.Global, MaxWait: 10 * time.Second, MaxQueue: 50, Store: store}), // 100/min for the fleet, queued
		admission.WithClientIP(admission.ClientIP{TrustedProxies: []string{"10.0.0.0/8"}}), // believe X-Forwarded-For from these only
		admission.WithExemptPaths("/health"))
	if err != nil {
		fmt.Println(err)
		return
	}

	get := func(path, peer, forwardedFor string) string {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.RemoteAddr = peer + ":40000"
		if forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", forwardedFor)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			return fmt.Sprintf("%d, retry after %ss", rec.Code, rec.Header().Get("Retry-After"))
		}
		return fmt.Sprint(rec.Code)
	}
	for i := 1; i <= 6; i++ {
		fmt.Printf("203.0.113.9 through the balancer, request %d: %s\n", i, get("/items", "10.0.0.7", "203.0.113.9"))
	}
	fmt.Println("198.51.100.1 claiming to be 203.0.113.9:", get("/items", "198.51.100.1", "203.0.113.9"))
	fmt.Println("203.0.113.9's health check:", get("/health", "10.0.0.7", "203.0.113.9"))
	// Output:
	// 203.0.113.9 through the balancer, request 1: 200
	// 203.0.113.9 through the balancer, request 2: 200
	// 203.0.113.9 through the balancer, request 3: 200
	// 203.0.113.9 through the balancer, request 4: 200
	// 203.0.113.9 through the balancer, request 5: 200
	// 203.0.113.9 through the balancer, request 6: 429, retry after 6s
	// 198.51.100.1 claiming to be 203.0.113.9: 200
	// 203.0.113.9's health check: 200
}
