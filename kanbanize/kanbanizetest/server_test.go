package kanbanizetest

import (
	"cmp"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestEndpointsUseTheAPIFieldNames(t *testing.T) {
	cardKeys := func(watchers string) []string {
		return []string{
			"card_id", "custom_id", "board_id", "workflow_id", "title", "description",
			"owner_user_id", "type_id", "color", "section", "column_id", "lane_id",
			"position", "last_column_id", "last_lane_id", "size", "priority", "deadline",
			"reporter", "created_at", "last_modified", "revision",
			"in_current_position_since", "first_request_time", "first_start_time",
			"first_end_time", "last_request_time", "last_start_time", "last_end_time",
			"is_blocked", "block_reason", "tag_ids", "milestone_ids", "co_owner_ids",
			watchers, "custom_fields", "stickers", "annotations", "attachments",
			"cover_image", "linked_cards", "child_card_stats", "subtasks",
			"finished_subtask_count", "unfinished_subtask_count",
		}
	}
	commentKeys := []string{"comment_id", "type", "text", "attachments", "created_at", "last_modified"}
	plainKeys := append(slices.Clone(commentKeys), "author")
	emailKeys := append(slices.Clone(commentKeys), "sender", "recipients")
	subtaskKeys := []string{"subtask_id", "description", "owner_user_id", "finished_at", "deadline", "position", "attachments"}

	s := New(Config{})
	tests := []struct {
		path     string
		wantKeys [][]string // of each object in "data", in order
	}{
		{path: "/cards/103", wantKeys: [][]string{append(cardKeys("watcher_ids"), "version")}},
		{path: "/cards/101", wantKeys: [][]string{cardKeys("watchers_ids")}},
		{path: "/cards/104/comments", wantKeys: [][]string{plainKeys, plainKeys, emailKeys, emailKeys}},
		{path: "/cards/103/subtasks", wantKeys: [][]string{subtaskKeys, subtaskKeys, subtaskKeys}},
	}
	for _, tt := range tests {
		r := get(t, s, tt.path)
		if r.status != 200 {
			t.Fatalf("GET %s = %d %s, want 200", tt.path, r.status, r.body)
		}
		if got := r.header.Get("Content-Type"); got != "application/json" {
			t.Errorf("GET %s: Content-Type = %q, want application/json", tt.path, got)
		}
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal([]byte(r.body), &env); err != nil {
			t.Fatalf("GET %s: body %q: %v", tt.path, r.body, err)
		}
		var objs []map[string]any
		if !strings.Contains(tt.path, "/comments") && !strings.Contains(tt.path, "/subtasks") {
			objs = make([]map[string]any, 1)
			err := json.Unmarshal(env.Data, &objs[0])
			if err != nil {
				t.Fatal(err)
			}
		} else if err := json.Unmarshal(env.Data, &objs); err != nil {
			t.Fatal(err)
		}
		if len(objs) != len(tt.wantKeys) {
			t.Fatalf("GET %s returned %d objects, want %d", tt.path, len(objs), len(tt.wantKeys))
		}
		for i, o := range objs {
			got := slices.Sorted(maps.Keys(o))
			want := slices.Sorted(slices.Values(tt.wantKeys[i]))
			if !slices.Equal(got, want) {
				t.Errorf("GET %s: keys of object %d = %v, want %v", tt.path, i, got, want)
			}
		}
		if tt.path == "/cards/103" {
			card := objs[0]
			if got, ok := card["is_blocked"].(float64); !ok || got != 0 {
				t.Errorf(`GET %s: "is_blocked" = %#v, want the number 0`, tt.path, card["is_blocked"])
			}
			if got := card["finished_subtask_count"]; got != 1.0 {
				t.Errorf(`GET %s: "finished_subtask_count" = %v, want 1`, tt.path, got)
			}
		}
	}
}

func TestServedJSONMatchesFixtures(t *testing.T) {
	s := New(Config{Cards: Fixtures(12)})
	for id := FirstCardID; id < FirstCardID+12; id++ {
		fx, ok := s.Card(id)
		if !ok {
			t.Fatalf("Card(%d) = false, want a fixture", id)
		}
		fx.Card.Extra = nil // written, never read back
		var card struct{ Data Card }
		decode(t, get(t, s, "/cards/"+strconv.Itoa(id)), &card)
		if !reflect.DeepEqual(card.Data, fx.Card) {
			t.Errorf("GET /cards/%d = %+v, want %+v", id, card.Data, fx.Card)
		}
		var comments struct{ Data []Comment }
		decode(t, get(t, s, "/cards/"+strconv.Itoa(id)+"/comments"), &comments)
		if !reflect.DeepEqual(comments.Data, fx.Comments) {
			t.Errorf("GET /cards/%d/comments = %+v, want %+v", id, comments.Data, fx.Comments)
		}
		var subtasks struct{ Data []Subtask }
		decode(t, get(t, s, "/cards/"+strconv.Itoa(id)+"/subtasks"), &subtasks)
		if !reflect.DeepEqual(subtasks.Data, fx.Subtasks) {
			t.Errorf("GET /cards/%d/subtasks = %+v, want %+v", id, subtasks.Data, fx.Subtasks)
		}
	}
}

func TestErrorAnswers(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		key        string
		wantStatus int
		wantCode   string
	}{
		{name: "unknown card", path: "/cards/99", key: DefaultAPIKey, wantStatus: 404, wantCode: "CA01"},
		{name: "unknown card comments", path: "/cards/5000/comments", key: DefaultAPIKey, wantStatus: 404, wantCode: "CA01"},
		{name: "card ID not a number", path: "/cards/abc/subtasks", key: DefaultAPIKey, wantStatus: 404, wantCode: "CA01"},
		{name: "unknown path", path: "/boards", key: DefaultAPIKey, wantStatus: 404, wantCode: "NF01"},
		{name: "unknown card subpath", path: "/cards/100/notes", key: DefaultAPIKey, wantStatus: 404, wantCode: "NF01"},
		{name: "no card ID", path: "/cards/", key: DefaultAPIKey, wantStatus: 404, wantCode: "NF01"},
		{name: "POST", method: http.MethodPost, path: "/cards/100", key: DefaultAPIKey, wantStatus: 405, wantCode: "MA01"},
		{name: "missing key", path: "/cards/100", wantStatus: 401, wantCode: "AU01"},
		{name: "wrong key", path: "/cards/100", key: "not-the-key", wantStatus: 401, wantCode: "AU01"},
		{name: "key with a suffix", path: "/cards/100", key: DefaultAPIKey + "x", wantStatus: 401, wantCode: "AU01"},
	}
	s := New(Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := cmp.Or(tt.method, http.MethodGet)
			r := do(t, s.Transport(), method, api+tt.path, tt.key)
			if r.status != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", method, tt.path, r.status, r.body, tt.wantStatus)
			}
			if got := errorOf(t, r).Error.Code; got != tt.wantCode {
				t.Errorf("%s %s: code = %q, want %q", method, tt.path, got, tt.wantCode)
			}
			if tt.key != "" && strings.Contains(r.body, tt.key) {
				t.Errorf("%s %s: body %q contains the API key", method, tt.path, r.body)
			}
			if strings.Contains(r.body, DefaultAPIKey) {
				t.Errorf("%s %s: body %q contains the server's API key", method, tt.path, r.body)
			}
		})
	}
}

func TestUnauthorizedMessage(t *testing.T) {
	s := New(Config{APIKey: "0"}) // a key that hex references could contain
	for range 20 {
		r := do(t, s.Transport(), http.MethodGet, api+"/cards/100", "1")
		e := errorOf(t, r)
		if r.status != 401 || e.Error.Code != "AU01" || e.Error.Message != "Invalid or missing API key." {
			t.Fatalf("GET with a wrong key = %d %s, want 401 AU01 %q", r.status, r.body, "Invalid or missing API key.")
		}
		if strings.Contains(e.Error.Reference, "0") {
			t.Fatalf("reference = %q, want it not to contain the key %q", e.Error.Reference, "0")
		}
	}
}

func TestHeaderNameIsCaseInsensitive(t *testing.T) {
	s := New(Config{APIKey: "k"})
	// Raw map keys, as a server that did not canonicalize would see them.
	for _, name := range []string{"Apikey", "apikey", "APIKEY", "ApiKey"} {
		req := httptest.NewRequest(http.MethodGet, api+"/cards/100", nil)
		req.Header = http.Header{name: {"k"}}
		resp, err := s.Transport().RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET with the header %q = %d, want 200", name, resp.StatusCode)
		}
	}
}

func TestStats(t *testing.T) {
	s := New(Config{})
	get(t, s, "/cards/100")
	get(t, s, "/cards/100/comments")
	get(t, s, "/cards/100/comments")
	get(t, s, "/elsewhere")
	do(t, s.Transport(), http.MethodGet, api+"/cards/100/subtasks", "wrong")
	want := Stats{
		Requests:     5,
		ByEndpoint:   map[Endpoint]int{EndpointCard: 1, EndpointComments: 2, EndpointSubtasks: 1, EndpointAPILimits: 0},
		Unauthorized: 1,
	}
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	b, err := json.Marshal(s.Stats())
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"requests":5,"by_endpoint":{"api_limits":0,"card":1,"comments":2,"subtasks":1},"limited":0,"faults":0,"unauthorized":1}`
	if string(b) != wantJSON {
		t.Errorf("json.Marshal(Stats()) = %s, want %s", b, wantJSON)
	}
}

func TestCardReturnsACopy(t *testing.T) {
	cards := Fixtures(3)
	s := New(Config{Cards: cards})
	cards[1].Card.Title = "changed by the caller"
	fx, _ := s.Card(101)
	fx.Comments[0].Text = "changed"
	fx.Card.TagIDs[0] = -1
	again, ok := s.Card(101)
	if !ok || again.Card.Title != titles[1] || again.Comments[0].Text == "changed" || again.Card.TagIDs[0] == -1 {
		t.Errorf("Card(101) = %+v after changes to earlier copies, want the fixture unchanged", again)
	}
	if _, ok := s.Card(103); ok {
		t.Errorf("Card(103) = true, want false with 3 cards")
	}
}

func TestNilSlicesServedAsEmptyArrays(t *testing.T) {
	s := New(Config{Cards: []CardFixture{{Card: Card{CardID: 7, Title: "bare"}}}})
	tests := []struct{ path, want string }{
		{path: "/cards/7/comments", want: `{"data":[]}`},
		{path: "/cards/7/subtasks", want: `{"data":[]}`},
	}
	for _, tt := range tests {
		if got := get(t, s, tt.path).body; got != tt.want {
			t.Errorf("GET %s = %s, want %s", tt.path, got, tt.want)
		}
	}
	if body := get(t, s, "/cards/7").body; !strings.Contains(body, `"tag_ids":[]`) {
		t.Errorf("GET /cards/7 = %s, want \"tag_ids\":[]", body)
	}
}

func TestHandler(t *testing.T) {
	s := New(Config{})
	req := httptest.NewRequest(http.MethodGet, "/api/v2/cards/101", nil)
	req.Header.Set("apikey", DefaultAPIKey)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"card_id":101`) {
		t.Errorf("Handler() on GET /api/v2/cards/101 = %d %s, want 200 and card 101", w.Code, w.Body)
	}
}

func TestRoute(t *testing.T) {
	tests := []struct {
		give   string
		want   Endpoint
		wantID int
		wantOK bool
	}{
		{give: "/api/v2/cards/12", want: EndpointCard, wantID: 12, wantOK: true},
		{give: "/api/v2/cards/12/comments", want: EndpointComments, wantID: 12, wantOK: true},
		{give: "/api/v2/cards/12/subtasks", want: EndpointSubtasks, wantID: 12, wantOK: true},
		{give: "/api/v2/cards/x", want: EndpointCard, wantOK: true},
		{give: "/api/v2/cards/-3", want: EndpointCard, wantOK: true},
		{give: "/api/v2/cards/12/", wantOK: false},
		{give: "/api/v2/cards/12/comments/1", wantOK: false},
		{give: "/api/v2/cards", wantOK: false},
		{give: "/api/v1/cards/12", wantOK: false},
	}
	for _, tt := range tests {
		e, id, ok := route(tt.give)
		if e != tt.want || id != tt.wantID || ok != tt.wantOK {
			t.Errorf("route(%q) = %q, %d, %v, want %q, %d, %v", tt.give, e, id, ok, tt.want, tt.wantID, tt.wantOK)
		}
	}
}

func decode(t *testing.T, r result, v any) {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status = %d %s, want 200", r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// TestForbiddenCard: a fixture marked Forbidden answers 403 with code FB01
// and details on each of its endpoints; the other cards are served.
func TestForbiddenCard(t *testing.T) {
	cards := Fixtures(3)
	cards[1].Forbidden = true
	s := New(Config{Cards: cards})
	for _, path := range []string{"/cards/101", "/cards/101/comments", "/cards/101/subtasks"} {
		r := get(t, s, path)
		e := errorOf(t, r)
		if r.status != http.StatusForbidden || e.Error.Code != "FB01" || e.Error.Message == "" {
			t.Errorf("GET %s = %d %s, want 403 FB01", path, r.status, r.body)
		}
		var details map[string]int
		if err := json.Unmarshal(e.Error.Details, &details); err != nil || details["card_id"] != 101 || details["board_id"] != cards[1].Card.BoardID {
			t.Errorf("GET %s: details = %s (%v), want the card 101 and its board %d", path, e.Error.Details, err, cards[1].Card.BoardID)
		}
	}
	if r := get(t, s, "/cards/102"); r.status != 200 {
		t.Errorf("GET /cards/102 = %d, want 200", r.status)
	}
	if fx, _ := s.Card(101); !fx.Forbidden {
		t.Error("Card(101).Forbidden = false, want the fixture as served")
	}
}
