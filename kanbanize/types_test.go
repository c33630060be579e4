package kanbanize

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A card as an older or differently configured account may send it:
// numbers as strings, a custom ID as a number, timestamps in three forms,
// empty strings for absent values, and fields this client does not know.
const oddCard = `{
	"card_id": "345", "custom_id": 17, "board_id": 2, "workflow_id": "21",
	"title": "Odd card", "description": "<p>x</p>", "owner_user_id": null, "type_id": "",
	"color": "34a97b", "section": "2", "column_id": 22, "lane_id": 202, "position": "3",
	"size": "2.5", "priority": null, "deadline": "2026-05-01",
	"reporter": {"type": "email", "value": "someone@example.com"},
	"created_at": "2026-01-07 11:00:00", "last_modified": "2026-01-09T11:00:00+00:00",
	"is_blocked": true, "block_reason": {"reason_id": 1, "comment": "waiting"},
	"tag_ids": ["2", 6], "co_owner_ids": [], "watcher_ids": [2],
	"custom_fields": [{"field_id": 1, "value": "x"}], "linked_cards": [],
	"finished_subtask_count": "1", "unfinished_subtask_count": 2.0,
	"version": 3, "nested": {"unknown": [1, 2]}
}`

func TestLenientCardDecoding(t *testing.T) {
	var c Card
	if err := json.Unmarshal([]byte(oddCard), &c); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	if c.CardID != 345 || c.CustomID != "17" || c.Section != 2 || c.Position != 3 || c.Size == nil || *c.Size != 2.5 ||
		c.TypeID == nil || *c.TypeID != 0 || c.OwnerUserID != nil || !bool(c.IsBlocked) || c.FinishedSubtaskCount != 1 ||
		c.UnfinishedSubtaskCount != 2 || len(c.TagIDs) != 2 || c.TagIDs[0] != 2 {
		t.Errorf("card = %+v", c)
	}
	for _, tt := range []struct {
		name string
		got  Time
		want string
	}{
		{"deadline", c.Deadline, "2026-05-01T00:00:00Z"},
		{"created_at", c.CreatedAt, "2026-01-07T11:00:00Z"},
		{"last_modified", c.LastModified, "2026-01-09T11:00:00Z"},
	} {
		if !tt.got.Equal(mustTime(t, tt.want)) {
			t.Errorf("%s = %v, want %s", tt.name, tt.got, tt.want)
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"card_id":345`, `"custom_id":"17"`, `"size":2.5`, `"is_blocked":true`, `"priority":null`, `"deadline":"2026-05-01T00:00:00Z"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("encoded card lacks %s: %s", want, out)
		}
	}
}

func TestLenientTypesRefuseGarbage(t *testing.T) {
	for _, give := range []string{`"x"`, `1.5`, `true`} {
		var n Int
		if err := json.Unmarshal([]byte(give), &n); err == nil {
			t.Errorf("Int(%s) decoded", give)
		}
	}
	for _, give := range []string{`"soon"`, `"2026-13-01"`, `12`} {
		var tm Time
		if err := json.Unmarshal([]byte(give), &tm); err == nil {
			t.Errorf("Time(%s) decoded", give)
		}
	}
	var f Float
	if err := json.Unmarshal([]byte(`"NaN"`), &f); err == nil {
		t.Error(`Float("NaN") decoded`)
	}
	var tx Text
	if err := json.Unmarshal([]byte(`{}`), &tx); err == nil {
		t.Error("Text({}) decoded")
	}
	var zero Time
	if b, _ := json.Marshal(zero); string(b) != "null" {
		t.Errorf("zero Time encodes as %s, want null", b)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestWatcherIDsBothSpellings: the OpenAPI document of 2023 names the
// watchers "watchers_ids", live answers "watcher_ids"; a card reads
// either, both merged, and writes "watcher_ids" only.
func TestWatcherIDsBothSpellings(t *testing.T) {
	tests := []struct {
		name string
		give string // members of the card
		want []ID
	}{
		{name: "watcher_ids", give: `"watcher_ids":[3,11]`, want: []ID{3, 11}},
		{name: "watchers_ids", give: `"watchers_ids":[3,11]`, want: []ID{3, 11}},
		{name: "both, merged", give: `"watcher_ids":[3,11],"watchers_ids":[11,12]`, want: []ID{3, 11, 12}},
		{name: "both, old first", give: `"watchers_ids":[12],"watcher_ids":[3]`, want: []ID{3, 12}},
		{name: "numbers as strings", give: `"watchers_ids":["3","11"]`, want: []ID{3, 11}},
		{name: "empty", give: `"watcher_ids":[]`, want: []ID{}},
		{name: "null", give: `"watchers_ids":null`, want: nil},
		{name: "neither", give: `"title":"x"`, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Card
			if err := json.Unmarshal([]byte(`{"card_id":1,`+tt.give+`}`), &c); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.WatcherIDs, tt.want) {
				t.Errorf("WatcherIDs of {%s} = %#v, want %#v", tt.give, c.WatcherIDs, tt.want)
			}
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), "watchers_ids") || strings.Count(string(out), `"watcher_ids":`) != 1 {
				t.Errorf("encoded card = %s, want one watcher_ids and no watchers_ids", out)
			}
		})
	}
	var bad Card
	if err := json.Unmarshal([]byte(`{"watchers_ids":["x"]}`), &bad); err == nil {
		t.Error(`watchers_ids ["x"] decoded, want an error`)
	}
}

// TestEmailComments: comments sent or received as email carry a sender
// and recipients to, cc and bcc instead of an author, and keep them.
func TestEmailComments(t *testing.T) {
	internal := func(id string) Author { return Author{Type: "internal", Value: json.RawMessage(id)} }
	external := func(addr string) Author { return Author{Type: "external", Value: json.RawMessage(`"` + addr + `"`)} }
	tests := []struct {
		name           string
		give           string
		wantSender     *Author
		wantRecipients *Recipients
		wantAuthor     *Author
	}{
		{
			name: "sent as email",
			give: `{"comment_id":1,"type":"sent as email","sender":{"type":"internal","value":7},
				"recipients":{"to":[{"type":"external","value":"a@x.example"},{"type":"external","value":"b@x.example"}],
				"cc":[{"type":"internal","value":"11"}],"bcc":[{"type":"external","value":"audit@example.com"}]}}`,
			wantSender: &Author{Type: "internal", Value: json.RawMessage(`7`)},
			wantRecipients: &Recipients{To: []Author{external("a@x.example"), external("b@x.example")},
				CC: []Author{internal(`"11"`)}, BCC: []Author{external("audit@example.com")}},
		},
		{
			name:           "received as email",
			give:           `{"comment_id":2,"type":"received as email","author":null,"sender":{"type":"external","value":"ops@vendor.example"},"recipients":{"to":[{"type":"internal","value":7}],"cc":[],"bcc":[]}}`,
			wantSender:     &Author{Type: "external", Value: json.RawMessage(`"ops@vendor.example"`)},
			wantRecipients: &Recipients{To: []Author{internal("7")}, CC: []Author{}, BCC: []Author{}},
		},
		{
			name:           "addresses as bare strings",
			give:           `{"comment_id":3,"sender":"ops@vendor.example","recipients":{"to":["a@x.example"],"cc":[7]}}`,
			wantSender:     &Author{Value: json.RawMessage(`"ops@vendor.example"`)},
			wantRecipients: &Recipients{To: []Author{{Value: json.RawMessage(`"a@x.example"`)}}, CC: []Author{{Value: json.RawMessage(`7`)}}},
		},
		{
			name:           "people of another form kept whole",
			give:           `{"comment_id":4,"sender":{"email":"ops@vendor.example","name":"Ops"},"recipients":[{"type":"external","value":"a@x.example"}]}`,
			wantSender:     &Author{Value: json.RawMessage(`{"email":"ops@vendor.example","name":"Ops"}`)},
			wantRecipients: &Recipients{To: []Author{external("a@x.example")}},
		},
		{
			name:       "plain",
			give:       `{"comment_id":5,"type":"plain","author":{"type":"internal","value":7}}`,
			wantAuthor: &Author{Type: "internal", Value: json.RawMessage(`7`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Comment
			if err := json.Unmarshal([]byte(tt.give), &c); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Sender, tt.wantSender) || !reflect.DeepEqual(c.Recipients, tt.wantRecipients) || !reflect.DeepEqual(c.Author, tt.wantAuthor) {
				t.Errorf("comment %s: sender %s, recipients %s, author %s; want %s, %s, %s", tt.give,
					js(c.Sender), js(c.Recipients), js(c.Author), js(tt.wantSender), js(tt.wantRecipients), js(tt.wantAuthor))
			}
			if got, want := c.IsEmail(), tt.wantSender != nil; got != want {
				t.Errorf("IsEmail() = %v, want %v", got, want)
			}
			// What is read encodes, and reads back the same.
			out, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var again Comment
			if err := json.Unmarshal(out, &again); err != nil || !reflect.DeepEqual(again.Sender, c.Sender) || !reflect.DeepEqual(again.Recipients, c.Recipients) {
				t.Errorf("%s reads back as sender %s, recipients %s (%v)", out, js(again.Sender), js(again.Recipients), err)
			}
		})
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
