package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// This file runs toxiproxy in the test process: one proxy per test, on a
// free port of 127.0.0.1, in front of one upstream, and the toxics the
// tests put on it.

// toxic is one of toxiproxy's toxics, as its API takes it: a type, the
// stream it breaks ("downstream", server to client, or "upstream"), and
// the type's attributes (milliseconds, bytes, KB/s, as toxiproxy reads
// them).
type toxic struct {
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Attributes map[string]any `json:"attributes"`
}

// name is how the proxy knows the toxic: its type and stream.
func (x toxic) name() string { return x.Type + "_" + x.Stream }

// String reads as the test names it: type/stream.
func (x toxic) String() string { return x.Type + "/" + x.Stream }

// streams are both directions a toxic can break.
var streams = []string{"downstream", "upstream"}

// proxy is a toxiproxy proxy in front of one upstream.
type proxy struct {
	p    *toxiproxy.Proxy
	Addr string // where clients connect: 127.0.0.1 and the proxy's port
}

var proxies atomic.Int64

// startProxy starts a proxy in front of upstream (host:port), stopped
// when the test ends.
func startProxy(t testing.TB, upstream string) *proxy {
	t.Helper()
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(server, fmt.Sprintf("proxy%d", proxies.Add(1)), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("starting toxiproxy in front of %s: %v", upstream, err)
	}
	t.Cleanup(p.Stop)
	return &proxy{p: p, Addr: p.Listen}
}

// add puts x on the proxy: the connections open now and those to come
// meet it.
func (p *proxy) add(t testing.TB, x toxic) {
	t.Helper()
	spec, err := json.Marshal(x)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.p.Toxics.AddToxicJson(strings.NewReader(string(spec))); err != nil {
		t.Fatalf("adding the toxic %s: %v", x, err)
	}
}

// remove takes x off the proxy; removing one that is not there is no
// error, so that a soak can turn toxics off blindly.
//
// toxiproxy's RemoveToxic can block for good, holding the proxy's lock,
// when a connection's destination died with data in the toxic's chain
// (Shopify/toxiproxy#428, open): nothing then ends the test but go
// test's timeout, ten minutes on. A removal that takes longer than
// removeHangs ends the test binary at once, naming that cause.
func (p *proxy) remove(t testing.TB, x toxic) {
	t.Helper()
	if p.p.Toxics.GetToxic(x.name()) == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- p.p.Toxics.RemoveToxic(context.WithoutCancel(t.Context()), x.name()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("removing the toxic %s: %v", x, err)
		}
	case <-time.After(removeHangs):
		panic(fmt.Sprintf("%s: toxiproxy's RemoveToxic(%s) has not returned in %v: a link whose destination died with data in flight (Shopify/toxiproxy#428); not a fault of ratewise", t.Name(), x, removeHangs))
	}
}

// removeHangs is how long a toxic's removal may take before remove takes
// it for toxiproxy's hang: removals take milliseconds.
const removeHangs = 30 * time.Second
