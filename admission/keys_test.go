package admission

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// New says what is wrong with every bad option at once.
func TestNewRefusesBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want []string
	}{
		{"invalid", []Option{WithLimit(Limit{Burst: -1})}, []string{"Burst (-1) must not be negative"}},
		{"burst alone", []Option{WithLimit(Limit{Name: "ip", Burst: 5})}, []string{`Limit "ip": Burst (5) needs a Rate or a Window`}},
		{"window store", []Option{WithLimit(Limit{Burst: 2, Window: time.Second, Store: ratewise.NewMemoryStore()})}, []string{"takes no"}},
		{"names", []Option{WithLimit(adrPerIP()), WithLimit(adrPerIP())}, []string{`two scopes are named "ip"`}},
		{"name", []Option{WithLimit(Limit{Name: "ü", Rate: 1})}, []string{"printable ASCII"}},
		{"proxies", []Option{WithClientIP(ClientIP{TrustedProxies: []string{"10.0.0.0/8", "proxy.internal"}})}, []string{`"proxy.internal"`}},
		{"path", []Option{WithExemptPaths("health")}, []string{"start it with /"}},
		{"all at once", []Option{WithLimit(Limit{Burst: -1}), WithExemptPaths("health")}, []string{"Burst", "health"}},
	}
	for _, tt := range tests {
		_, err := New(ok, tt.opts...)
		if err == nil {
			t.Errorf("%s: New succeeded", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "ratewise: ") {
				t.Errorf("%s: New = %v; want it to say %q", tt.name, err, w)
			}
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
	if h, err := New(ok, WithLimit(Limit{Name: "free", Rate: rate.Inf})); err != nil || serve(h, "192.0.2.1:1", "/").Code != 200 {
		t.Errorf("an unlimited scope: %v", err)
	}
}

// Keys seen once and idle again are dropped as new ones come: memory
// stays bounded however many clients call.
func TestIdleKeysAreDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "ip", Rate: 10, Burst: 1}))
		for i := range 50000 {
			serve(h, fmt.Sprintf("10.%d.%d.%d:1", i/65536, i/256%256, i%256), "/")
			if i%1000 == 999 {
				time.Sleep(time.Second) // every bucket so far is full again
			}
		}
		// A shard drops its idle keys each time it doubles from 64: it
		// keeps at most 128, and the 64 shards 8192, the last second's
		// 1000 keys among them.
		if n := h.scopes[0].keys.len(); n > shardCount*2*minPrune {
			t.Errorf("%d keys kept after 50000 clients, all but 1000 idle; want at most %d", n, shardCount*2*minPrune)
		}
	})
}

// adr-009, "key by route": a scope keyed by RouteOf(mux) gives each route
// of the mux it wraps its own bucket; Route does the same for a Handler
// that wraps one route's handler.
func TestRouteKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", ok)
		mux.Handle("GET /users/{id}", ok)
		perRoute := Limit{Name: "route", Rate: perMinute(1), Burst: 1}
		perRoute.Key = RouteOf(mux)
		h, err := New(mux, WithLimit(perRoute))
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			path string
			want int
		}{{"/items/1", 200}, {"/items/2", 429}, {"/users/1", 200}, {"/users/2", 429}, {"/nowhere", 404}, {"/elsewhere", 429}} {
			if rec := serve(h, "192.0.2.1:1", tt.path); rec.Code != tt.want {
				t.Errorf("wrapping the mux, %s: %d, want %d", tt.path, rec.Code, tt.want)
			}
		}

		inner := Limit{Name: "route", Rate: perMinute(1), Burst: 1, Key: Route}
		mux = http.NewServeMux()
		mux.Handle("GET /items/{id}", newHandler(t, WithLimit(inner)))
		for _, tt := range []struct {
			path string
			want int
		}{{"/items/1", 200}, {"/items/2", 429}} {
			if rec := serve(mux, "192.0.2.1:1", tt.path); rec.Code != tt.want {
				t.Errorf("inside the route, %s: %d, want %d", tt.path, rec.Code, tt.want)
			}
		}
	})
}

// userKey is where an authentication middleware put the user.
type userKey struct{}

// adr-009, "key by a header or authenticated user": a scope keyed by
// ratewise.ByHeader counts each API key apart (hashed: the credential is
// not the key), and one keyed by a KeyFunc reading the context counts
// each user apart, whatever address they come from.
func TestHeaderAndUserKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		user := func(r *http.Request) string { u, _ := r.Context().Value(userKey{}).(string); return u }
		h := newHandler(t,
			WithLimit(Limit{Name: "key", Rate: perMinute(1), Burst: 2, Key: ratewise.ByHeader("X-Api-Key")}),
			WithLimit(Limit{Name: "user", Rate: perMinute(1), Burst: 1, Key: user}))
		var keys []string
		h.hooks.Admitted = func(e Event) { keys = append(keys, e.Scope+"="+e.Key) }
		send := func(remote, apiKey, who string) int {
			req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
			req = req.WithContext(context.WithValue(req.Context(), userKey{}, who))
			req.RemoteAddr = remote
			req.Header.Set("X-Api-Key", apiKey)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code
		}
		got := []int{
			send("192.0.2.1:1", "secret-a", "ann"),
			send("192.0.2.2:1", "secret-a", "bob"),
			send("192.0.2.3:1", "secret-a", "cyd"), // key a spent
			send("192.0.2.4:1", "secret-b", "ann"), // ann spent
			send("192.0.2.4:1", "secret-b", "dan"),
		}
		if fmt.Sprint(got) != "[200 200 429 429 200]" {
			t.Errorf("answers %v, want [200 200 429 429 200]", got)
		}
		for _, k := range keys {
			if strings.Contains(k, "secret") {
				t.Errorf("a key holds the credential: %s", k)
			}
		}
	})
}
