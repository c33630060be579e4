package ratewise

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

const (
	// peekLimit bounds what is read of a response body to match
	// RateLimitPhrases or fill RateLimitError.RawBody.
	peekLimit = 4 << 10
	// maxDrain bounds what is read of a discarded response body so that its
	// connection can be reused; past it the connection is closed instead,
	// which is cheaper than reading a large or endless body.
	maxDrain = 64 << 10
)

// drainAndClose reads what is left of a discarded response body, up to
// maxDrain, and closes it.
func drainAndClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	_ = body.Close()
}

// closeRequestBody closes req.Body on a return before the body was handed
// to the base RoundTripper, as the RoundTripper contract asks.
func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// peekedBody serves a prefix already read from a body, then the rest of it.
type peekedBody struct {
	prefix []byte
	off    int
	err    error // the error that ended the peek early, if any
	rest   io.ReadCloser
}

func (b *peekedBody) Read(p []byte) (int, error) {
	if b.off < len(b.prefix) {
		n := copy(p, b.prefix[b.off:])
		b.off += n
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.rest.Read(p)
}

func (b *peekedBody) Close() error { return b.rest.Close() }

// peekBody returns up to n bytes from the start of resp's body and puts
// them back, so that whoever reads the body next still gets all of it.
func peekBody(resp *http.Response, n int) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	if b, ok := resp.Body.(*peekedBody); ok && b.off == 0 && (len(b.prefix) >= n || b.err != nil) {
		return b.prefix[:min(n, len(b.prefix))]
	}
	buf := make([]byte, n)
	got, err := io.ReadFull(resp.Body, buf)
	buf = buf[:got]
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF // the body ended within n bytes
	}
	// Any other error is kept for the reader, after the bytes that arrived.
	resp.Body = &peekedBody{prefix: buf, err: err, rest: resp.Body}
	return buf
}

// prepareBody makes the call's request body replayable: through GetBody
// when the request has one, else by buffering it when its ContentLength is
// known and at most MaxBufferedBody. Any other body is sent once, with no
// retry: a stream of unknown length may be slow, or wait on the response,
// and must not be read ahead of the send.
func (c *call) prepareBody() error {
	if c.req.Body != nil && c.req.GetBody == nil {
		return c.bufferRequestBody()
	}
	c.replayable = true // inlined: most requests have no body to buffer
	return nil
}

// bufferRequestBody is prepareBody of a body without GetBody.
func (c *call) bufferRequestBody() error {
	req := c.req
	switch {
	case req.Body == http.NoBody:
		c.replayable = true
		return nil
	case c.policy.MaxAttempts == 1 || req.ContentLength <= 0 || req.ContentLength > c.policy.MaxBufferedBody:
		return nil // sent as it is, once
	}
	data, once, ok, err := bufferBody(req.Body, c.policy.MaxBufferedBody)
	if err != nil {
		return fmt.Errorf("ratewise: reading the request body: %w", err)
	}
	out := new(http.Request)
	*out = *req
	if ok {
		c.replayable, c.buffered, c.bodyData = true, true, data
		out.Body = bufferedReader(data)
		out.GetBody = getBodyFunc(data)
	} else {
		out.Body = once
	}
	c.out = out
	return nil
}

// nextRequest returns the request for the next attempt: the caller's own
// when it has no body, else a shallow copy carrying a fresh body.
func (c *call) nextRequest() (*http.Request, error) {
	req := c.req
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	out := new(http.Request)
	*out = *req
	if c.buffered {
		out.Body = bufferedReader(c.bodyData)
		out.GetBody = getBodyFunc(c.bodyData)
		return out, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	if body == nil {
		body = http.NoBody
	}
	out.Body = body
	return out, nil
}

// getBodyFunc returns a GetBody for a buffered body. It captures the data,
// not the call, which must stay on RoundTrip's stack.
func getBodyFunc(data []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return bufferedReader(data), nil }
}

func bufferedReader(data []byte) io.ReadCloser {
	if len(data) == 0 {
		return http.NoBody
	}
	return io.NopCloser(bytes.NewReader(data))
}

// bufferBody reads a request body into memory so that it can be replayed.
// It reads at most limit bytes: a larger body (one longer than its
// ContentLength said) is returned as a reader over what was read followed
// by the unread rest, and ok is false because it can be sent only once. The
// original body is closed once fully read, or left to the base RoundTripper
// otherwise.
func bufferBody(body io.ReadCloser, limit int64) (data []byte, once io.ReadCloser, ok bool, err error) {
	data, err = io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		_ = body.Close()
		return nil, nil, false, err
	}
	if int64(len(data)) <= limit {
		_ = body.Close()
		return data, nil, true, nil
	}
	return nil, &peekedBody{prefix: data, rest: body}, false, nil
}
