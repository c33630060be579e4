package otel

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/ratewise/ratewise"
)

// This file is the request's attributes, after the stable HTTP
// conventions (semantic-conventions docs/http/http-spans.md).

// knownMethods are the methods the conventions name; any other is
// "_OTHER", its own spelling in http.request.method_original.
var knownMethods = map[string]bool{
	http.MethodConnect: true, http.MethodDelete: true, http.MethodGet: true, http.MethodHead: true,
	http.MethodOptions: true, http.MethodPatch: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodTrace: true, "QUERY": true,
}

// method is a request's method as the conventions spell it.
type method struct {
	name     string // http.request.method: a known method, or "_OTHER"
	original string // the request's own, when name is "_OTHER"
}

func methodAttrs(m string) method {
	if m == "" {
		m = http.MethodGet // net/http's reading of an empty method
	}
	if knownMethods[m] {
		return method{name: m}
	}
	return method{name: "_OTHER", original: m}
}

// spanName is "{method}" or "{method} {url.template}"; "HTTP" stands for
// a method the conventions do not know.
func spanName(m method, template string) string {
	name := m.name
	if name == "_OTHER" {
		name = "HTTP"
	}
	if template != "" {
		return name + " " + template
	}
	return name
}

// requestAttrs are the attributes the conventions require of a client
// request: its method, server address and port, and its full URL, with
// credentials and secret query values redacted as ratewise redacts them.
func requestAttrs(req *http.Request, m method) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(m.name))
	if m.original != "" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(m.original))
	}
	if req.URL == nil {
		return attrs
	}
	host, port := serverOf(req)
	attrs = append(attrs, semconv.ServerAddress(host), semconv.ServerPort(port),
		semconv.URLFull(ratewise.Redact(req.URL.String(), req)))
	return attrs
}

// serverOf is the host and port the request goes to, the port from its
// scheme when the URL has none.
func serverOf(req *http.Request) (string, int) {
	host := req.URL.Hostname()
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			return host, n
		}
	}
	if req.URL.Scheme == "https" {
		return host, 443
	}
	return host, 80
}
