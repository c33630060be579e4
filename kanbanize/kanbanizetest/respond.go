package kanbanizetest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// answer is what the fake says to one request.
type answer struct {
	status int
	header http.Header
	body   []byte
	reset  bool // drop the connection instead
}

// respond decides the answer to r, in the order the real API checks:
// method, path, key, rate limits, card. The error is set, and the answer
// empty, when the request was abandoned during the latency.
func (s *Server) respond(r *http.Request, stop <-chan struct{}) (answer, error) {
	e, id, routed := route(r.URL.Path)
	s.mu.Lock()
	s.stats.Requests++
	if routed {
		s.stats.ByEndpoint[e]++
	}
	s.mu.Unlock()

	if err := s.wait(r.Context(), stop); err != nil {
		return answer{}, err
	}
	switch {
	case r.Method != http.MethodGet:
		a := s.errorAnswer(http.StatusMethodNotAllowed, "MA01", "Method not allowed; this API answers GET only.")
		a.header.Set("Allow", http.MethodGet)
		return a, nil
	case !routed:
		return s.errorAnswer(http.StatusNotFound, "NF01", "Not found: no such API path."), nil
	}
	key := apiKey(r.Header)
	if !s.accepts(key) {
		s.mu.Lock()
		s.stats.Unauthorized++
		s.mu.Unlock()
		return s.errorAnswer(http.StatusUnauthorized, "AU01", "Invalid or missing API key."), nil
	}

	f, wait, admitted := s.admit(e, key)
	switch {
	case f == Fault429, f == FaultNone && !admitted && !s.cfg.RL02:
		return s.limitedAnswer(http.StatusTooManyRequests, "RL01", wait), nil
	case f == FaultRL02, f == FaultNone && !admitted:
		return s.limitedAnswer(http.StatusBadRequest, "RL02", wait), nil
	case f == Fault503:
		return answer{status: http.StatusServiceUnavailable, header: http.Header{}}, nil
	case f == FaultReset:
		return answer{reset: true}, nil
	}
	var a answer
	if e == EndpointAPILimits {
		a = s.limitsAnswer()
	} else {
		a = s.cardAnswer(e, id)
	}
	if f == FaultMalformedJSON {
		a.status = http.StatusOK
		a.body = a.body[:len(a.body)/2]
		a.header.Set("Content-Length", strconv.Itoa(len(a.body)))
	}
	return a, nil
}

// admit plays the script of e and, when it says to serve normally, the
// rate limits of key. It returns the scripted fault, the time until a
// refused request could pass, and whether it may pass.
func (s *Server) admit(e Endpoint, key string) (f Fault, wait time.Duration, admitted bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.scriptAt[e]; n < len(s.cfg.Scripts[e]) {
		f = s.cfg.Scripts[e][n]
	}
	s.scriptAt[e]++
	if s.cfg.PerAccount {
		key = "" // one pair of buckets for every key of the account
	}
	b := s.buckets[key]
	if b == nil {
		b = newBuckets(s.cfg.PerMinute, s.cfg.PerHour, s.cfg.TimeScale)
		s.buckets[key] = b
	}
	switch f {
	case FaultNone:
		admitted, wait = b.take(now)
		if !admitted {
			s.stats.Limited++
		}
		return f, wait, admitted
	case Fault429, FaultRL02:
		s.stats.Limited++
		// Scripted refusals may come with tokens to spare; they still ask
		// for a second, as a real refusal would.
		return f, max(b.until(now), time.Second), false
	}
	s.stats.Faults++
	return f, 0, true
}

// wait waits out the configured latency. It returns an error wrapping the
// context's error if ctx ends first, or one saying the server closed if
// stop is closed first.
func (s *Server) wait(ctx context.Context, stop <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("kanbanizetest: request abandoned before it was served: %w", err)
	}
	if s.cfg.Latency == 0 {
		return nil
	}
	t := time.NewTimer(s.cfg.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kanbanizetest: request abandoned during the %v latency: %w", s.cfg.Latency, ctx.Err())
	case <-stop:
		return errClosed
	}
}

var errClosed = errors.New("kanbanizetest: server closed during the latency")

// accepts reports whether key is one of the server's keys, comparing each
// in constant time.
func (s *Server) accepts(key string) bool {
	ok := 0
	for _, k := range s.keys {
		ok |= subtle.ConstantTimeCompare([]byte(key), k)
	}
	return ok == 1
}

// apiKey returns the apikey header of h, whatever the case of its name:
// in-process requests have not been through a server that canonicalizes.
func apiKey(h http.Header) string {
	if v := h.Get("apikey"); v != "" {
		return v
	}
	for name, v := range h {
		if strings.EqualFold(name, "apikey") && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// route parses an API path into the endpoint and card ID it names. The ID
// is 0 when not a positive integer, which names no card.
func route(path string) (e Endpoint, id int, ok bool) {
	if path == "/api/v2/apiLimits" {
		return EndpointAPILimits, 0, true
	}
	rest, ok := strings.CutPrefix(path, "/api/v2/cards/")
	if !ok {
		return "", 0, false
	}
	idText, sub, _ := strings.Cut(rest, "/")
	switch {
	case idText == "":
		return "", 0, false
	case !strings.Contains(rest, "/"):
		e = EndpointCard
	case sub == "comments":
		e = EndpointComments
	case sub == "subtasks":
		e = EndpointSubtasks
	default:
		return "", 0, false
	}
	id, err := strconv.Atoi(idText)
	if err != nil || id < 0 {
		id = 0
	}
	return e, id, true
}

// cardAnswer serves endpoint e of card id.
func (s *Server) cardAnswer(e Endpoint, id int) answer {
	sv, ok := s.cards[id]
	if !ok {
		return s.errorAnswer(http.StatusNotFound, "CA01", "Card not found.")
	}
	if sv.fixture.Forbidden {
		return s.errorAnswerDetails(http.StatusForbidden, "FB01", "You do not have permission to see this card.",
			map[string]int{"card_id": id, "board_id": sv.fixture.Card.BoardID})
	}
	return jsonAnswer(http.StatusOK, sv.body[e])
}

// limitedAnswer refuses a request that could pass after wait.
func (s *Server) limitedAnswer(status int, code string, wait time.Duration) answer {
	a := s.errorAnswer(status, code, "Rate limit exceeded.")
	if v := retryAfter(s.cfg.RetryAfter, time.Now(), wait); v != "" {
		a.header.Set("Retry-After", v)
	}
	return a
}

// errorAnswer returns the API's error body, with a fresh reference.
func (s *Server) errorAnswer(status int, code, message string) answer {
	return s.errorAnswerDetails(status, code, message, nil)
}

// errorAnswerDetails returns the API's error body with details, which
// must encode, or without them when nil.
func (s *Server) errorAnswerDetails(status int, code, message string, details any) answer {
	type apiError struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Reference string `json:"reference"`
		Details   any    `json:"details,omitempty"`
	}
	b, _ := json.Marshal(struct { // cannot fail: strings, and details that encode
		Error apiError `json:"error"`
	}{apiError{Code: code, Message: message, Reference: s.reference(), Details: details}})
	return jsonAnswer(status, b)
}

func jsonAnswer(status int, body []byte) answer {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return answer{status: status, header: h, body: body}
}

// reference returns a hex string that looks random, is different on each
// call, and never contains an API key the server accepts.
func (s *Server) reference() string {
	for {
		// The splitmix64 finaliser spreads a counter over all 64 bits.
		x := s.refs.Add(1) * 0x9e3779b97f4a7c15
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		ref := fmt.Sprintf("%016x", x^x>>31)
		if !slices.ContainsFunc(s.keys, func(k []byte) bool { return strings.Contains(ref, string(k)) }) {
			return ref
		}
	}
}
