package admission

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Headers picks the rate-limit fields a Handler writes, as a set of flags:
// HeaderRateLimit (the IETF fields), HeaderXRateLimit, HeaderRetryAfter,
// and HeaderRefusalsOnly to keep the quota fields to refusals;
// DefaultHeaders writes every field. See "Headers" in the package doc for
// what each says.
type Headers uint8

// The flags of Headers.
const (
	// HeaderRateLimit writes the IETF RateLimit-Policy and RateLimit.
	HeaderRateLimit Headers = 1 << iota
	// HeaderXRateLimit writes X-RateLimit-Limit, -Remaining and -Reset.
	HeaderXRateLimit
	// HeaderRetryAfter writes Retry-After on refusals.
	HeaderRetryAfter
	// HeaderRefusalsOnly keeps the quota fields to refusals.
	HeaderRefusalsOnly
)

// DefaultHeaders are the fields a Handler writes unless told otherwise.
const DefaultHeaders = HeaderRateLimit | HeaderXRateLimit | HeaderRetryAfter

// Canonical header names, set directly in the header map.
const (
	hPolicy     = "Ratelimit-Policy"
	hRateLimit  = "Ratelimit"
	hLimit      = "X-Ratelimit-Limit"
	hRemaining  = "X-Ratelimit-Remaining"
	hReset      = "X-Ratelimit-Reset"
	hRetryAfter = "Retry-After"
)

// Route keys a request by the pattern of the http.ServeMux route that
// matched it (Request.Pattern, such as "GET /items/{id}"), which the mux
// sets before it calls the route's handler: use it in a Handler that
// wraps a route's handler (mux.Handle(pattern, h)). A request no route
// matched has the key "". For a Handler that wraps the whole mux, use
// RouteOf.
func Route(r *http.Request) string { return r.Pattern }

// RouteOf keys a request by the pattern of the route of mux it goes to,
// for a Handler that wraps mux: requests no route matches share the key
// "".
func RouteOf(mux *http.ServeMux) func(*http.Request) string {
	return func(r *http.Request) string {
		_, pattern := mux.Handler(r)
		return pattern
	}
}

// scopeView is a scope's view for a request's headers.
type scopeView struct {
	s *scope
	v view
}

// writeQuota writes the quota fields of the turns taken, at now, to hdr.
// The X-RateLimit fields are the binding scope's: the one with the fewest
// turns left, and of those the longest reset.
func (h *Handler) writeQuota(hdr http.Header, turns []turn, now int64) {
	if h.headers&(HeaderRateLimit|HeaderXRateLimit) == 0 || len(turns) == 0 {
		return
	}
	var held [maxHeld]scopeView
	views := held[:0]
	binding := -1
	for i := range turns {
		t := &turns[i]
		v := t.s.viewAt(t, now)
		views = append(views, scopeView{t.s, v})
		if v.ok && (binding < 0 || binds(v, views[binding].v)) {
			binding = len(views) - 1
		}
	}
	h.writeFields(hdr, views, binding)
}

// binds reports whether v binds before w: fewer turns left, or as few and
// a longer reset.
func binds(v, w view) bool {
	return v.remaining < w.remaining || v.remaining == w.remaining && v.reset > w.reset
}

// span is a part of the string writeFields builds.
type span struct{ start, end int }

// writeFields writes the RateLimit fields of views, and the X-RateLimit
// ones of views[binding] (none when binding < 0). The values that change
// from request to request are cut from one string: a request's headers
// cost two allocations, that string and the slice that holds the values.
func (h *Handler) writeFields(hdr http.Header, views []scopeView, binding int) {
	ietf := h.headers&HeaderRateLimit != 0
	x := h.headers&HeaderXRateLimit != 0 && binding >= 0
	if !ietf && !x {
		return
	}
	var buf [256]byte
	b := buf[:0]
	var rl, rem, res span
	if ietf {
		n := 0
		for i, sv := range views {
			if !sv.v.ok {
				continue
			}
			if n > 0 {
				b = append(b, ", "...)
			}
			n++
			b = append(b, sv.s.itemPrefix...)
			start := len(b)
			b = strconv.AppendInt(b, sv.v.remaining, 10)
			if i == binding {
				rem = span{start, len(b)}
			}
			b = append(b, ";t="...)
			start = len(b)
			b = strconv.AppendInt(b, ceilSeconds(sv.v.reset), 10)
			if i == binding {
				res = span{start, len(b)}
			}
		}
		rl = span{0, len(b)}
	}
	if x && rem.end == 0 {
		rem.start = len(b)
		b = strconv.AppendInt(b, views[binding].v.remaining, 10)
		rem.end = len(b)
		res.start = len(b)
		b = strconv.AppendInt(b, ceilSeconds(views[binding].v.reset), 10)
		res.end = len(b)
	}
	s := string(b)
	// Each header has a slice of its own, not one shared with other
	// answers: a handler may write into it.
	vals := make([]string, 5)
	if ietf {
		if len(views) == h.limiting {
			vals[0] = h.policy
		} else {
			items := make([]string, len(views))
			for i, sv := range views {
				items[i] = sv.s.policyItem
			}
			vals[0] = strings.Join(items, ", ")
		}
		hdr[hPolicy] = vals[0:1:1]
		if rl.end > 0 {
			vals[1] = s[rl.start:rl.end]
			hdr[hRateLimit] = vals[1:2:2]
		}
	}
	if x {
		vals[2], vals[3], vals[4] = views[binding].s.limitValue, s[rem.start:rem.end], s[res.start:res.end]
		hdr[hLimit] = vals[2:3:3]
		hdr[hRemaining] = vals[3:4:4]
		hdr[hReset] = vals[4:5:5]
	}
}

// refuseLimited answers a request that no, a scope's limit, refused:
// 429, the quota fields of every scope that applies to it (those given
// back, the refusing one, and the later ones as this process knows
// them), Retry-After and a problem document.
func (h *Handler) refuseLimited(w http.ResponseWriter, r *http.Request, turns []turn, no *refusal, now int64) {
	var held [maxHeld + 1]scopeView
	views := held[:0]
	for i := range turns {
		t := &turns[i]
		v := t.s.viewAt(t, now)
		if t.shared {
			v = t.s.sharedView(t.tokens + 1) // the one given back
		}
		views = append(views, scopeView{t.s, v})
	}
	binding := -1
	if no.view.ok {
		binding = len(views)
	}
	views = append(views, scopeView{no.s, no.view})
	violated := []*scope{no.s}
	retry := no.wait
	after := false
	for _, s := range h.scopes {
		if s == no.s {
			after = true
			continue
		}
		if !after || s.kind == kindNone || s.applies != nil && !s.applies(r) {
			continue
		}
		var key string
		switch {
		case s.global:
		case s.key == nil:
			key = h.ip.clientIP(r)
		default:
			key = s.key(r)
		}
		wait, v := s.peek(key, now)
		views = append(views, scopeView{s, v})
		if wait > 0 {
			violated = append(violated, s)
			retry = max(retry, wait)
		}
	}
	h.writeFields(w.Header(), views, binding)
	h.writeProblem(w, r, http.StatusTooManyRequests, problemQuota, violated, max(retry, 1))
}

// problemKind is what a problem document says.
type problemKind uint8

const (
	problemQuota     problemKind = iota // 429: a quota is spent
	problemStoreDown                    // 503: a store that fails closed failed
	problemCanceled                     // 503: the request ended while it waited
)

// The problem types: the IETF draft's, registered with IANA by it.
const (
	typeQuotaExceeded   = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	typeReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// problemJSON is the media type of a problem document.
const problemJSON = "application/problem+json"

// writeProblem answers with status, Retry-After (when retryAfter, in
// nanoseconds, is above 0) and a problem document (RFC 9457) of kind,
// naming the violated scopes and the wait in its "violated-policies"
// and "retry-after" members.
func (h *Handler) writeProblem(w http.ResponseWriter, r *http.Request, status int, kind problemKind, violated []*scope, retryAfter int64) {
	secs := max(ceilSeconds(retryAfter), 1)
	hdr := w.Header()
	if retryAfter > 0 && h.headers&HeaderRetryAfter != 0 {
		hdr[hRetryAfter] = []string{strconv.FormatInt(secs, 10)}
	}
	if h.respond != nil {
		// RetryAfter says what the Retry-After field says: whole seconds.
		refusal := Refusal{Status: status, Scopes: make([]string, 0, len(violated))}
		if retryAfter > 0 {
			refusal.RetryAfter = time.Duration(secs) * time.Second
		}
		for _, s := range violated {
			refusal.Scopes = append(refusal.Scopes, s.name)
		}
		h.respond(w, r, refusal)
		return
	}
	hdr["Content-Type"] = []string{problemJSON}
	b := make([]byte, 0, 256)
	switch kind {
	case problemQuota:
		b = append(b, `{"type":"`+typeQuotaExceeded+`","title":"Too Many Requests","status":429,"detail":"The request exceeds the rate limit; retry in `...)
		b = strconv.AppendInt(b, secs, 10)
		b = append(b, ` s."`...)
	case problemStoreDown:
		b = append(b, `{"type":"`+typeReducedCapacity+`","title":"Service Unavailable","status":503,"detail":"The rate limit cannot be checked now; retry in `...)
		b = strconv.AppendInt(b, secs, 10)
		b = append(b, ` s."`...)
	case problemCanceled:
		b = append(b, `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"The request ended while it waited for its turn."`...)
	}
	if len(violated) > 0 {
		b = append(b, `,"violated-policies":[`...)
		for i, s := range violated {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s.jsonName...)
		}
		b = append(b, ']')
	}
	if retryAfter > 0 {
		b = append(b, `,"retry-after":`...)
		b = strconv.AppendInt(b, secs, 10)
	}
	b = append(b, "}\n"...)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
