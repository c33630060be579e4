package ratewise

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// This file keeps secrets out of what the transport reports: the last
// error of Stats and the events of WithLogger. An error from a base
// RoundTripper may quote the request's URL, and with it a password or a
// token in its query.

// redacted replaces a secret.
const redacted = "REDACTED"

// secretWords are the parts of a header's or query parameter's name that
// say it carries a credential ("sig" covers signature and api_sig).
const secretWords = `auth|key|token|secret|passw|pwd|session|cookie|sig|credential`

// secretName matches the names of headers and query parameters that carry
// credentials.
var secretName = regexp.MustCompile(`(?i)` + secretWords)

// Patterns that look like secrets wherever they appear: a URL's user
// info, a query parameter named like a credential, a bearer token.
var (
	userInfoPattern    = regexp.MustCompile(`(://)[^/@\s]+@`)
	secretParamPattern = regexp.MustCompile(`(?i)([?&;][^=&\s"']*(?:` + secretWords + `)[^=&\s"']*=)[^&\s"']+`)
	bearerPattern      = regexp.MustCompile(`(?i)(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{4,}`)
)

// Redact returns s with the secrets of req removed (the values of its
// credential headers, its URL's user info, its query parameters named
// like keys or tokens) and anything shaped like a secret: user info in a
// URL, a query parameter named like a key or token, a bearer token. Use it
// on any text about a request that leaves the process: an error, a log
// line. req may be nil.
func Redact(s string, req *http.Request) string {
	if req != nil {
		for _, v := range requestSecrets(req) {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	s = userInfoPattern.ReplaceAllString(s, "${1}"+redacted+"@")
	s = secretParamPattern.ReplaceAllString(s, "${1}"+redacted)
	return bearerPattern.ReplaceAllString(s, "${1} "+redacted)
}

// redactError is Redact of err's text.
func redactError(err error, req *http.Request) string {
	return Redact(err.Error(), req)
}

// requestSecrets lists the secret values req carries, longest first so
// that one containing another is removed whole. Values of fewer than four
// characters are left: replacing them would garble the text more than it
// protects.
func requestSecrets(req *http.Request) []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	for name, values := range req.Header {
		if !secretName.MatchString(name) {
			continue
		}
		for _, v := range values {
			add(v)
			if _, token, ok := strings.Cut(v, " "); ok {
				add(strings.TrimSpace(token)) // "Bearer <token>"
			}
		}
	}
	if u := req.URL; u != nil {
		if u.User != nil {
			add(u.User.Username())
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		for name, values := range u.Query() {
			if secretName.MatchString(name) {
				for _, v := range values {
					add(v)
					add(url.QueryEscape(v))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}
