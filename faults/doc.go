// Package faults holds ratewise's tests under a real fault proxy: Shopify's
// toxiproxy, run in the test process on 127.0.0.1, between a ratewise
// transport and the servers it calls (a Go server over HTTP/1.1 and over
// HTTP/2, nginx's limit_req) and between the redis store and a real
// redis-server. Each toxic breaks a connection the way real networks do
// (latency, a trickle of bytes, a black hole, a reset, a cut after N
// bytes), in each direction, and each test says what a caller then sees.
//
// The package has no API: it is a module of its own so that toxiproxy and
// its dependencies stay out of ratewise's. Run it with `make test`, or
// `go test ./...` here; `go test -run TestSoakUnderToxics -soak=10m` runs
// the soak with toxics turned on and off at random.
package faults
