package composite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestEnvelopeLeavesOutSecrets: http.Client's *url.Error quotes the whole
// URL, so a branch error can carry a token; no form of the envelope may.
func TestEnvelopeLeavesOutSecrets(t *testing.T) {
	const token = "tok-1234567890"
	cause := errors.New("connection reset by peer; Authorization: Bearer " + token)
	failing := func(ctx context.Context) error {
		return &url.Error{Op: "Get", URL: "https://api.example.com/cards/1?api_token=" + token, Err: cause}
	}
	res, err := Run(context.Background(), Branch{Name: "card", Call: func(context.Context) error { return nil }},
		[]Branch{{Name: "comments", Call: failing}}, Options{FailOnPartial: true})
	if err == nil {
		t.Fatal("a failed secondary with FailOnPartial did not fail the run")
	}
	envelope, jerr := json.Marshal(res)
	if jerr != nil {
		t.Fatal(jerr)
	}
	o, _ := res.Outcome("comments")
	for _, text := range []string{err.Error(), string(envelope), fmt.Sprintf("%+v", res), o.Err.Error()} {
		if strings.Contains(text, token) {
			t.Errorf("the envelope shows the token: %s", text)
		}
		if !strings.Contains(text, "connection reset by peer") {
			t.Errorf("redaction lost the error itself: %s", text)
		}
	}
	var urlErr *url.Error
	if !errors.As(o.Err, &urlErr) || !errors.Is(err, cause) {
		t.Errorf("the branch error can no longer be inspected: As url.Error %v, Is cause %v", urlErr != nil, errors.Is(err, cause))
	}
	if strings.Contains(string(envelope), `"Err":{`) {
		t.Errorf("Err is marshalled as an object, not its text: %s", envelope)
	}
}
