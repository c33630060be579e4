package kanbanize

import (
	"encoding/json"
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
	"tag_ids": ["2", 6], "co_owner_ids": [], "watchers_ids": [2],
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
