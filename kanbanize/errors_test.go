package kanbanize

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestErrorBody reads the members of error bodies, details included,
// each on its own, so that one of an unexpected form loses no other.
func TestErrorBody(t *testing.T) {
	tests := []struct {
		name                     string
		status                   int
		body                     string
		wantCode, wantMessage    string
		wantReference            string
		wantDetails              string // compact JSON, "" for none
		wantError                string
		wantForbidden, wantFound bool
	}{
		{
			name: "403 with details", status: 403,
			body:     `{"error":{"code":"FB01","message":"No access to card 105.","reference":"9f2c","details":{"card_id":105,"board_id":2}}}`,
			wantCode: "FB01", wantMessage: "No access to card 105.", wantReference: "9f2c",
			wantDetails:   `{"card_id":105,"board_id":2}`,
			wantError:     `kanbanize: 403 Forbidden (FB01): No access to card 105. (details: {"card_id":105,"board_id":2})`,
			wantForbidden: true, wantFound: true,
		},
		{
			name: "details as a list", status: 400,
			body:     `{"error":{"code":"VE01","message":"Invalid input.","reference":"a1","details":["title is required", "size is not a number"]}}`,
			wantCode: "VE01", wantMessage: "Invalid input.", wantReference: "a1",
			wantDetails: `["title is required","size is not a number"]`,
			wantError:   `kanbanize: 400 Bad Request (VE01): Invalid input. (details: ["title is required","size is not a number"])`,
			wantFound:   true,
		},
		{
			name: "details as text", status: 403,
			body:     `{"error":{"code":"FB01","message":"Forbidden.","reference":"b2","details":"The user is not a board member."}}`,
			wantCode: "FB01", wantMessage: "Forbidden.", wantReference: "b2",
			wantDetails:   `"The user is not a board member."`,
			wantError:     `kanbanize: 403 Forbidden (FB01): Forbidden. (details: "The user is not a board member.")`,
			wantForbidden: true,
		},
		{
			name: "details null", status: 404,
			body:     `{"error":{"code":"CA01","message":"Card not found.","reference":"c3","details":null}}`,
			wantCode: "CA01", wantMessage: "Card not found.", wantReference: "c3",
			wantError: "kanbanize: 404 Not Found (CA01): Card not found.",
		},
		{
			name: "no details", status: 404,
			body:     `{"error":{"code":"CA01","message":"Card not found.","reference":"c3"}}`,
			wantCode: "CA01", wantMessage: "Card not found.", wantReference: "c3",
			wantError: "kanbanize: 404 Not Found (CA01): Card not found.",
		},
		{
			name: "numeric code and reference", status: 403,
			body:     `{"error":{"code":403,"message":"Forbidden.","reference":12345,"details":{"reason":"role"}}}`,
			wantCode: "403", wantMessage: "Forbidden.", wantReference: "12345", wantDetails: `{"reason":"role"}`,
			wantError:     `kanbanize: 403 Forbidden (403): Forbidden. (details: {"reason":"role"})`,
			wantForbidden: true,
		},
		{
			name: "message of another type", status: 500,
			body:     `{"error":{"code":"SE01","message":{"text":"oops"},"details":[1]}}`,
			wantCode: "SE01", wantDetails: `[1]`,
			wantError: `kanbanize: 500 Internal Server Error (SE01) (details: [1])`,
		},
		{
			name: "error as a string", status: 401,
			body:        `{"error":"unauthorized"}`,
			wantMessage: "unauthorized",
			wantError:   "kanbanize: 401 Unauthorized: unauthorized",
		},
		{
			name: "not JSON", status: 503, body: `<html>Service Unavailable</html>`,
			wantError: "kanbanize: 503 Service Unavailable",
		},
		{
			name: "long details cut", status: 403,
			body:     `{"error":{"code":"FB01","message":"No.","details":"` + strings.Repeat("é", 150) + `"}}`,
			wantCode: "FB01", wantMessage: "No.", wantDetails: `"` + strings.Repeat("é", 150) + `"`,
			wantError:     `kanbanize: 403 Forbidden (FB01): No. (details: "` + strings.Repeat("é", 99) + `…)`,
			wantForbidden: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newAPIError(&http.Response{StatusCode: tt.status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(tt.body))})
			if e.Code != tt.wantCode || e.Message != tt.wantMessage || e.Reference != tt.wantReference || string(compact(e.Details)) != tt.wantDetails {
				t.Errorf("newAPIError(%s) = code %q, message %q, reference %q, details %s; want %q, %q, %q, %s",
					tt.body, e.Code, e.Message, e.Reference, e.Details, tt.wantCode, tt.wantMessage, tt.wantReference, tt.wantDetails)
			}
			if e.Error() != tt.wantError {
				t.Errorf("Error() = %s, want %s", e.Error(), tt.wantError)
			}
			if got := errors.Is(e, ErrForbidden); got != tt.wantForbidden {
				t.Errorf("errors.Is(%d, ErrForbidden) = %v, want %v", tt.status, got, tt.wantForbidden)
			}
			if errors.Is(e, ErrForbidden) && (errors.Is(e, ErrNotFound) || errors.Is(e, ErrUnauthorized) || errors.Is(e, ErrRateLimited)) {
				t.Errorf("a 403 matches another sentinel: %v", e)
			}
		})
	}
}

// compact is b as compact JSON, nil for none.
func compact(b []byte) []byte {
	var out bytes.Buffer
	if len(b) == 0 || json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
