package kanbanize_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ratewise/ratewise/kanbanize"
)

type answerFunc func(*http.Request) (*http.Response, error)

func (f answerFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAnswerWithoutDataIsAnError: {"data":null} and {} are no card, not a
// card numbered 0.
func TestAnswerWithoutDataIsAnError(t *testing.T) {
	for _, body := range []string{`{"data":null}`, `{}`, `{"data": null }`} {
		base := answerFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
		})
		c, err := kanbanize.NewClient("acme", "secret-key-7f3a9", kanbanize.WithHTTPClient(&http.Client{Transport: base}))
		if err != nil {
			t.Fatal(err)
		}
		card, err := c.ReadCard(context.Background(), "102")
		if err == nil || !strings.Contains(err.Error(), "no data") {
			t.Errorf("%s: got %+v, %v; want an error saying the answer has no data", body, card, err)
		}
	}
}
