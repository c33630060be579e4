package admission

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP says where a request's client address comes from: the peer
// (RemoteAddr) or, when the peer is one of the TrustedProxies, the address
// the proxies say they received the request from. The zero value believes
// no header. A forged header moves no one to another key (see "Client
// addresses" in the package doc).
type ClientIP struct {
	// TrustedProxies are the proxies whose Header is believed: CIDR
	// prefixes ("10.0.0.0/8", "fd00::/8") or single addresses
	// ("192.0.2.10"). Empty means none.
	TrustedProxies []string
	// Header is the header the trusted proxies append the address of
	// their peer to: "X-Forwarded-For" (the zero value), "Forwarded"
	// (RFC 7239, its for= parameters), or a header of the same list form
	// such as "X-Real-IP" or "CF-Connecting-IP", whose one address a
	// trusted proxy sets. Give the one your proxies write: another one
	// passes through them unchecked, as the client sent it.
	Header string
}

// DefaultClientIPHeader is the header a ClientIP reads when its Header is
// empty.
const DefaultClientIPHeader = "X-Forwarded-For"

// ipResolver is a ClientIP ready to use: its prefixes parsed and its
// header's name in canonical form.
type ipResolver struct {
	trusted   []netip.Prefix
	header    string // canonical
	forwarded bool   // header is RFC 7239's Forwarded
}

func newIPResolver(c ClientIP) (ipResolver, error) {
	var errs []error
	r := ipResolver{header: http.CanonicalHeaderKey(c.Header)}
	if r.header == "" {
		r.header = DefaultClientIPHeader
	}
	r.forwarded = r.header == "Forwarded"
	for _, s := range c.TrustedProxies {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			r.trusted = append(r.trusted, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil {
			a = a.Unmap()
			r.trusted = append(r.trusted, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		errs = append(errs, fmt.Errorf("ratewise: admission: ClientIP.TrustedProxies: %q is neither a CIDR prefix (10.0.0.0/8) nor an address (10.0.0.1)", s))
	}
	return r, errors.Join(errs...)
}

// trusts reports whether addr, the text of an address, is a trusted
// proxy's.
func (r *ipResolver) trusts(addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range r.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientIP returns the client's address for req, as text: RemoteAddr's
// host, or the address the trusted proxies in front of it say. It
// allocates nothing, but for an address a proxy wrote in another form
// than Go's own (uppercase hex, an IPv4-mapped IPv6), which it rewrites
// so that one client has one key.
func (r *ipResolver) clientIP(req *http.Request) string {
	// RemoteAddr is as net/http writes it, in Go's own form already.
	client := hostOf(req.RemoteAddr)
	if len(r.trusted) == 0 || !r.trusts(client) {
		return client
	}
	values := req.Header[r.header]
	for i := len(values) - 1; i >= 0; i-- {
		list := values[i]
		for list != "" {
			var hop string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, hop = list[:j], list[j+1:]
			} else {
				list, hop = "", list
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			addr, ok := r.hopAddr(hop)
			if !ok {
				// Not an address (RFC 7239's "unknown", an obfuscated
				// name, garbage): the last trusted hop is all we know.
				return client
			}
			client = addr
			if !r.trusts(client) {
				return client
			}
		}
	}
	// Every hop is a trusted proxy's: the first of them sent it.
	return client
}

// hopAddr reads the address of one element of the header's list: an
// address, possibly with a port ("192.0.2.1:443", "[2001:db8::1]:443");
// for Forwarded, the for= parameter's, quoted or not.
func (r *ipResolver) hopAddr(hop string) (string, bool) {
	if r.forwarded {
		var found bool
		for param := range strings.SplitSeq(hop, ";") {
			k, v, ok := strings.Cut(param, "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
				hop, found = strings.Trim(strings.TrimSpace(v), `"`), true
				break
			}
		}
		if !found {
			return "", false
		}
	}
	hop = hostOf(hop)
	if _, err := netip.ParseAddr(hop); err != nil {
		return "", false
	}
	return canonicalAddr(hop), true
}

// canonicalAddr returns addr as Go writes the address it holds, IPv4
// unmapped, so that one client has one key however it was written: addr
// itself when it is so already, which it usually is, without allocating.
// Text that is no address is returned as it is.
func canonicalAddr(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	var buf [64]byte
	if string(a.AppendTo(buf[:0])) != addr {
		return a.String()
	}
	return addr
}

// hostOf strips the port, and the brackets of an IPv6 address, from addr:
// "192.0.2.1:80" and "[2001:db8::1]:80" give their address, and an
// address with neither is kept as it is. Unlike net.SplitHostPort it
// allocates no error for an address without a port.
func hostOf(addr string) string {
	if strings.HasPrefix(addr, "[") {
		if end := strings.IndexByte(addr, ']'); end > 0 {
			return addr[1:end]
		}
		return addr
	}
	// One colon is a port's; several are an IPv6 address's own.
	if i := strings.IndexByte(addr, ':'); i >= 0 && strings.IndexByte(addr[i+1:], ':') < 0 {
		return addr[:i]
	}
	return addr
}
