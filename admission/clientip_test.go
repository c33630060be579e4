package admission

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
)

func TestClientIP(t *testing.T) {
	proxies := []string{"10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.254"}
	tests := []struct {
		name    string
		ip      ClientIP
		remote  string
		headers []string
		want    string
	}{
		{"no proxy trusted", ClientIP{}, "203.0.113.9:5000", []string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.9"},
		{"IPv6 peer", ClientIP{}, "[2001:db8::7]:5000", nil, "2001:db8::7"},
		{"untrusted peer's header", ClientIP{TrustedProxies: proxies}, "203.0.113.9:5000",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "203.0.113.9"},
		{"one proxy", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"forged hop before the proxy's", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "10.9.9.9, 198.51.100.77, 198.51.100.1"}, "198.51.100.1"},
		{"two proxies", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.1, 192.0.2.254"}, "198.51.100.1"},
		{"lines in order", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.5", "X-Forwarded-For", "198.51.100.1, 10.4.4.4"}, "198.51.100.1"},
		{"every hop a proxy", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "10.2.2.2"}, "10.2.2.2"},
		{"no header", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000", nil, "10.1.2.3"},
		{"garbage hop", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.1, not-an-ip"}, "10.1.2.3"},
		{"hop with port", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.1:443"}, "198.51.100.1"},
		{"IPv6 hop, written long", ClientIP{TrustedProxies: proxies}, "[2001:db8:ffff::1]:5000",
			[]string{"X-Forwarded-For", "2001:DB8:0:0:0:0:0:7"}, "2001:db8::7"},
		{"IPv4-mapped hop", ClientIP{TrustedProxies: proxies}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "::ffff:198.51.100.1"}, "198.51.100.1"},
		{"IPv4-mapped trusted peer", ClientIP{TrustedProxies: proxies}, "[::ffff:10.1.2.3]:5000",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "198.51.100.1"},
		{"Forwarded", ClientIP{TrustedProxies: proxies, Header: "Forwarded"}, "10.1.2.3:5000",
			[]string{"Forwarded", `for=198.51.100.66, for="[2001:db8:cafe::17]:4711";proto=https, for=10.7.7.7;by=10.1.2.3`}, "2001:db8:cafe::17"},
		{"Forwarded unknown", ClientIP{TrustedProxies: proxies, Header: "forwarded"}, "10.1.2.3:5000",
			[]string{"Forwarded", `for=unknown`}, "10.1.2.3"},
		{"Forwarded read, X-Forwarded-For not", ClientIP{TrustedProxies: proxies, Header: "Forwarded"}, "10.1.2.3:5000",
			[]string{"X-Forwarded-For", "198.51.100.1", "Forwarded", "for=198.51.100.2"}, "198.51.100.2"},
		{"X-Real-IP", ClientIP{TrustedProxies: proxies, Header: "X-Real-IP"}, "10.1.2.3:5000",
			[]string{"X-Real-Ip", "198.51.100.3", "X-Forwarded-For", "198.51.100.1"}, "198.51.100.3"},
	}
	for _, tt := range tests {
		h := newHandler(t, WithClientIP(tt.ip))
		req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
		req.RemoteAddr = tt.remote
		for i := 0; i+1 < len(tt.headers); i += 2 {
			req.Header.Add(tt.headers[i], tt.headers[i+1])
		}
		if got := h.ClientIP(req); got != tt.want {
			t.Errorf("%s: ClientIP = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// adr-009, criterion "the client's IP, safely: a spoofed header from an
// untrusted peer never moves a caller to another bucket". A client that
// spent its bucket forges X-Forwarded-For and Forwarded, naming another
// client and a trusted proxy: it stays refused, and the other client's
// bucket is untouched. Behind a trusted proxy, what it forges before the
// proxy's own hop is not read either.
func TestSpoofedForwardingHeadersNeverMoveACaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHandler(t, WithLimit(Limit{Name: "ip", Rate: perMinute(1), Burst: 2}),
			WithClientIP(ClientIP{TrustedProxies: []string{"10.0.0.0/8"}}))
		const attacker, victim = "203.0.113.66:4000", "198.51.100.1:4000"
		for range 2 {
			serve(h, attacker, "/")
		}
		forgeries := [][]string{
			{"X-Forwarded-For", "198.51.100.1"},
			{"X-Forwarded-For", "198.51.100.1, 10.0.0.1"},
			{"X-Forwarded-For", "10.0.0.1"},
			{"Forwarded", "for=198.51.100.1"},
			{"X-Real-IP", "198.51.100.1"},
		}
		for _, f := range forgeries {
			if rec := serve(h, attacker, "/", f...); rec.Code != 429 {
				t.Errorf("the attacker with %s: %q: %d; want still refused", f[0], f[1], rec.Code)
			}
		}
		if got := h.Status(t.Context(), "198.51.100.1").Scopes[0]; got.Tokens != 2 {
			t.Errorf("the victim's bucket = %+v; want untouched, 2 tokens", got)
		}
		// Through the trusted proxy, the attacker's forged hops come
		// before the proxy's own, which names the attacker.
		for _, f := range []string{"198.51.100.1", "10.0.0.9", "198.51.100.1, 10.0.0.9"} {
			if rec := serve(h, "10.0.0.1:4000", "/", "X-Forwarded-For", f+", 203.0.113.66"); rec.Code != 429 {
				t.Errorf("through the proxy with a forged %q: %d; want still refused", f, rec.Code)
			}
		}
		if rec := serve(h, victim, "/"); rec.Code != 200 {
			t.Errorf("the victim: %d", rec.Code)
		}
		if rec := serve(h, "10.0.0.1:4000", "/", "X-Forwarded-For", "198.51.100.1"); rec.Code != 200 {
			t.Errorf("the victim through the proxy: %d; want its second token", rec.Code)
		}
		if rec := serve(h, victim, "/"); rec.Code != 429 {
			t.Errorf("the victim, third: %d; want its bucket spent, by itself alone", rec.Code)
		}
	})
}
