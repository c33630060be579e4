package kanbanize

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseCardID(t *testing.T) {
	tests := []struct {
		give    string
		want    ID
		wantErr bool
	}{
		{give: "345", want: 345},
		{give: "  345 ", want: 345},
		{give: "https://acme.kanbanize.com/ctrl_board/12/cards/345/details/", want: 345},
		{give: "https://acme.kanbanize.com/ctrl_board/12/cards/345", want: 345},
		{give: "https://acme.kanbanize.com/ctrl_board/12/cards/345/comments/", want: 345},
		{give: "https://x.businessmap.io/ctrl_board/8/cards/1", want: 1},
		{give: "https://ACME.Kanbanize.com/ctrl_board/12/cards/77/details", want: 77},
		{give: "http://acme.kanbanize.com/ctrl_board/12/cards/9", want: 9},
		{give: "", wantErr: true},
		{give: "0", wantErr: true},
		{give: "-5", wantErr: true},
		{give: "+5", wantErr: true},
		{give: "3.5", wantErr: true},
		{give: "abc", wantErr: true},
		{give: "99999999999999999999", wantErr: true},
		{give: "https://evil.example.com/ctrl_board/12/cards/345", wantErr: true},
		{give: "https://kanbanize.com/ctrl_board/12/cards/345", wantErr: true},
		{give: "https://acme.kanbanize.com.evil.io/cards/345", wantErr: true},
		{give: "https://acme.kanbanize.com/ctrl_board/12/", wantErr: true},
		{give: "https://acme.kanbanize.com/ctrl_board/12/cards/abc", wantErr: true},
		{give: "ftp://acme.kanbanize.com/cards/345", wantErr: true},
		{give: "acme.kanbanize.com/cards/345", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseCardID(tt.give)
		if tt.wantErr {
			if err == nil || !errors.Is(err, ErrBadCardID) {
				t.Errorf("ParseCardID(%q) = %v, %v; want ErrBadCardID", tt.give, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseCardID(%q) = %v, %v; want %v", tt.give, got, err, tt.want)
		}
	}
	_, err := ParseCardID(strings.Repeat("x", 500))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("ParseCardID of a long text: error %d characters long, want it short", len(err.Error()))
	}
}

func FuzzParseCardID(f *testing.F) {
	for _, seed := range []string{"345", "https://acme.kanbanize.com/ctrl_board/12/cards/345/details/",
		"https://x.businessmap.io/ctrl_board/8/cards/1", "0", "-1", "", "https://a.kanbanize.com/cards/", "https://%zz"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseCardID(s)
		if err != nil {
			if !errors.Is(err, ErrBadCardID) || id != 0 {
				t.Fatalf("ParseCardID(%q) = %v, %v; a refusal must be ErrBadCardID with 0", s, id, err)
			}
			return
		}
		if id <= 0 {
			t.Fatalf("ParseCardID(%q) = %v, want a positive ID", s, id)
		}
		// A URL's path may spell the digits percent-encoded (%31 is 1).
		if plain, err := url.PathUnescape(s); !strings.Contains(s, id.String()) && (err != nil || !strings.Contains(plain, id.String())) {
			t.Fatalf("ParseCardID(%q) = %v, which is not in the input", s, id)
		}
	})
}

func TestBaseURL(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{give: "acme", want: "https://acme.kanbanize.com/api/v2"},
		{give: " ACME ", want: "https://acme.kanbanize.com/api/v2"},
		{give: "https://acme.kanbanize.com", want: "https://acme.kanbanize.com/api/v2"},
		{give: "https://acme.kanbanize.com/", want: "https://acme.kanbanize.com/api/v2"},
		{give: "https://acme.businessmap.io", want: "https://acme.businessmap.io/api/v2"},
		{give: "https://acme.kanbanize.com/api/v2", want: "https://acme.kanbanize.com/api/v2"},
		{give: "https://acme.kanbanize.com/api/v2/", want: "https://acme.kanbanize.com/api/v2"},
		{give: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080/api/v2"},
		{give: ""},
		{give: "acme corp"},
		{give: "-acme"},
		{give: "ftp://acme.kanbanize.com"},
		{give: "https://user:pass@acme.kanbanize.com"},
		{give: "https://acme.kanbanize.com/?apikey=x"},
	}
	for _, tt := range tests {
		got, err := baseURL(tt.give)
		if tt.want == "" {
			if err == nil {
				t.Errorf("baseURL(%q) = %q, want an error", tt.give, got)
			} else if strings.Contains(err.Error(), "pass") {
				t.Errorf("baseURL(%q) error %q shows the password", tt.give, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("baseURL(%q) = %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
}

func TestFlagAndID(t *testing.T) {
	for give, want := range map[string]bool{"true": true, "1": true, `"1"`: true, "false": false, "0": false, "null": false} {
		var f Flag
		if err := f.UnmarshalJSON([]byte(give)); err != nil || bool(f) != want {
			t.Errorf("Flag(%s) = %v, %v; want %v", give, f, err, want)
		}
	}
	var f Flag
	if err := f.UnmarshalJSON([]byte(`"yes"`)); err == nil {
		t.Error(`Flag("yes") decoded without error`)
	}
	for give, want := range map[string]ID{"345": 345, `"345"`: 345, "null": 0} {
		var id ID
		if err := id.UnmarshalJSON([]byte(give)); err != nil || id != want {
			t.Errorf("ID(%s) = %v, %v; want %v", give, id, err, want)
		}
	}
	var id ID
	if err := id.UnmarshalJSON([]byte(`"x"`)); err == nil {
		t.Error(`ID("x") decoded without error`)
	}
}
