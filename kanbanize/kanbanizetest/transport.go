package kanbanizetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Transport returns an [http.RoundTripper] that serves requests from s in
// the calling goroutine: no network, no goroutine, no timer but the
// latency's, so it works inside [testing/synctest] bubbles with fake time.
// Any host is accepted; only the path matters. It returns an error wrapping
// the context's error when the request's context ends before the answer,
// and one wrapping [io.ErrUnexpectedEOF] for FaultReset.
func (s *Server) Transport() http.RoundTripper {
	return transport{s}
}

type transport struct{ s *Server }

var _ http.RoundTripper = transport{}

// errReset is what FaultReset looks like in-process: the connection ended
// before a response.
var errReset = fmt.Errorf("kanbanizetest: connection reset by the fake server (FaultReset): %w", io.ErrUnexpectedEOF)

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		// The fake reads no body, but the RoundTripper contract says to
		// close it, even on errors.
		defer req.Body.Close()
	}
	if req.URL == nil {
		return nil, errors.New("kanbanizetest: request has no URL")
	}
	a, err := t.s.respond(req, nil)
	if err != nil {
		return nil, err
	}
	if a.reset {
		return nil, errReset
	}
	return &http.Response{
		Status:        strconv.Itoa(a.status) + " " + http.StatusText(a.status),
		StatusCode:    a.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        a.header,
		Body:          io.NopCloser(bytes.NewReader(a.body)),
		ContentLength: int64(len(a.body)),
		Request:       req,
	}, nil
}
