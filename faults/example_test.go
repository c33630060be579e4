package faults_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/ratewise/ratewise"
)

// A host whose connections are reset before it answers: a POST is sent
// once and its caller gets the error (the server may have acted on it); a
// GET is sent again; and after three failures the breaker refuses calls
// without sending them.
func Example() {
	var received atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { received.Add(1) }))
	defer api.Close()

	// toxiproxy in front of the API, resetting every connection.
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(server, "api", "127.0.0.1:0", api.Listener.Addr().String())
	if err := proxy.Start(); err != nil {
		fmt.Println(err)
		return
	}
	defer proxy.Stop()
	_, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"type": "reset_peer", "stream": "downstream", "attributes": {"timeout": 0}}`))
	if err != nil {
		fmt.Println(err)
		return
	}

	var sent atomic.Int64
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: ratewise.New(counted{base, &sent},
		ratewise.WithBreaker(ratewise.BreakerPolicy{ConsecutiveFailures: 3, FailFast: true}))}
	url := "http://" + proxy.Listen

	_, err = client.Post(url, "text/plain", strings.NewReader("once"))
	fmt.Printf("POST: an error: %v; sent %d time\n", err != nil, sent.Load())
	_, err = client.Get(url)
	fmt.Printf("GET: an error: %v; sent %d times\n", err != nil, sent.Load()-1)
	_, err = client.Get(url)
	var open *ratewise.CircuitOpenError
	fmt.Printf("then: refused by the open breaker: %v\n", errors.As(err, &open))
	// Output:
	// POST: an error: true; sent 1 time
	// GET: an error: true; sent 2 times
	// then: refused by the open breaker: true
}

// counted counts the attempts ratewise sends.
type counted struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (c counted) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(req)
}
