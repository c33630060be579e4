package kanbanize_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise/kanbanize"
)

// at is the timestamp s, RFC 3339.
func at(t *testing.T, s string) kanbanize.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return kanbanize.Time{Time: v}
}

func ids(v ...kanbanize.ID) []kanbanize.ID { return v }

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// person is an author, sender or recipient {"type":typ,"value":value}.
func person(typ, value string) kanbanize.Author {
	return kanbanize.Author{Type: typ, Value: raw(value)}
}

// TestPublishedShapes reads a card, its comments and its subtasks in the
// shapes the API publishes (testdata/schema, see its README) and checks
// that every value arrives: each field equals the value of its member,
// and every member of the bodies is found again, once, when what was read
// is encoded back to JSON.
func TestPublishedShapes(t *testing.T) {
	bodies := map[string][]byte{}
	for _, e := range []string{"card", "comments", "subtasks"} {
		b, err := os.ReadFile("testdata/schema/" + e + ".json")
		if err != nil {
			t.Fatal(err)
		}
		bodies[e] = b
	}
	d, err := readCardServing(t, func(endpoint string) []byte { return bodies[endpoint] })
	if err != nil {
		t.Fatal(err)
	}

	stepOne := kanbanize.Subtask{SubtaskID: 7001, Description: "Provision the queue", OwnerUserID: ptr(kanbanize.ID(11)),
		FinishedAt: at(t, "2023-05-10T17:20:00Z"), Deadline: at(t, "2023-05-12T00:00:00Z"), Position: 0, Attachments: []kanbanize.Attachment{}}
	stepTwo := kanbanize.Subtask{SubtaskID: 7002, Description: "Switch the producers", Position: 1, Attachments: []kanbanize.Attachment{}}
	wantCard := kanbanize.Card{
		CardID: 4281, CustomID: "ENG-4281", BoardID: 12, WorkflowID: 31,
		Title: "Migrate billing webhooks", Description: "<p>Move the webhooks to the new queue.</p>",
		OwnerUserID: ptr(kanbanize.ID(7)), TypeID: ptr(kanbanize.ID(3)), Color: "34a97b",
		Section: 3, ColumnID: 122, LaneID: 45, Position: 2,
		LastColumnID: ptr(kanbanize.ID(121)), LastLaneID: ptr(kanbanize.ID(44)),
		Size: ptr(kanbanize.Float(5)), Priority: ptr(kanbanize.Int(2)), Deadline: at(t, "2023-06-30T15:00:00Z"),
		Reporter:  ptr(person("internal", "3")),
		CreatedAt: at(t, "2023-05-02T09:15:00Z"), LastModified: at(t, "2023-05-20T16:40:12Z"), Revision: 14,

		InCurrentPositionSince: at(t, "2023-05-18T08:00:00Z"),
		FirstRequestTime:       at(t, "2023-05-03T10:00:00Z"),
		FirstStartTime:         at(t, "2023-05-08T09:30:00Z"),
		LastRequestTime:        at(t, "2023-05-04T11:00:00Z"),
		LastStartTime:          at(t, "2023-05-18T08:00:00Z"),

		IsBlocked:    true,
		BlockReason:  raw(`{"block_type":1,"reason_id":2,"comment":"Waiting for the queue's credentials."}`),
		TagIDs:       ids(8, 9),
		MilestoneIDs: ids(2),
		CoOwnerIDs:   ids(11),
		WatcherIDs:   ids(3, 11),
		CustomFields: raw(`[{"field_id":15,"value":"EU","display_value":"EU"}]`),
		Stickers:     []kanbanize.Sticker{{ID: 55, CardID: 4281, StickerID: 4}},
		Annotations: []kanbanize.Annotation{{ThreadID: "t-1a2b", CommentID: "c-3c4d", AuthorID: 11,
			Content: "Which queue?", CreatedAt: at(t, "2023-05-04T12:00:00Z")}},
		Attachments: []kanbanize.Attachment{
			{ID: 901, FileName: "queue-design.pdf", Link: "https://files.example.com/queue-design.pdf", Position: ptr(kanbanize.Int(0))},
			{ID: 902, FileName: "mockup.png", Link: "https://files.example.com/mockup.png", Position: ptr(kanbanize.Int(1))},
		},
		CoverImage: &kanbanize.CoverImage{AttachmentID: 902, Link: "https://files.example.com/mockup.png", Width: 1200, Height: 800},
		LinkedCards: []kanbanize.LinkedCard{
			{CardID: 4100, LinkType: "parent"}, {CardID: 4290, LinkType: "child"}, {CardID: 4275, LinkType: "predecessor"},
		},
		ChildCardStats: &kanbanize.ChildCardStats{ChildCardSizeSum: 8, FinishedBottomChildCardSizeSum: 3,
			UnfinishedBottomChildCardSizeSum: 5, HasUnfinishedChildCards: true,
			LastUnfinishedChildCardDeadline: at(t, "2023-06-15T12:00:00Z")},
		Subtasks:             []kanbanize.Subtask{stepOne, stepTwo},
		FinishedSubtaskCount: 1, UnfinishedSubtaskCount: 1,
	}
	wantComments := []kanbanize.Comment{
		{CommentID: 31001, Type: "plain", Text: "<p>Queue provisioned, see the design.</p>",
			Attachments: []kanbanize.Attachment{{ID: 905, FileName: "queue-settings.txt", Link: "https://files.example.com/queue-settings.txt"}},
			CreatedAt:   at(t, "2023-05-10T17:25:00Z"), LastModified: at(t, "2023-05-10T17:31:00Z"),
			Author: ptr(person("internal", "11"))},
		{CommentID: 31002, Type: "sent as email", Text: "<p>Could you send the credentials for the new queue?</p>",
			Attachments: []kanbanize.Attachment{}, CreatedAt: at(t, "2023-05-11T08:02:00Z"),
			Sender: ptr(person("internal", "7")),
			Recipients: &kanbanize.Recipients{
				To:  []kanbanize.Author{person("external", `"ops@vendor.example"`)},
				CC:  []kanbanize.Author{person("internal", "11")},
				BCC: []kanbanize.Author{person("external", `"audit@example.com"`)},
			}},
		{CommentID: 31003, Type: "received as email", Text: "<p>Credentials are in the vault.</p>",
			Attachments: []kanbanize.Attachment{}, CreatedAt: at(t, "2023-05-12T14:45:00Z"),
			Sender:     ptr(person("external", `"ops@vendor.example"`)),
			Recipients: &kanbanize.Recipients{To: []kanbanize.Author{person("internal", "7")}, CC: []kanbanize.Author{}, BCC: []kanbanize.Author{}}},
	}
	stepOne.Attachments = []kanbanize.Attachment{{ID: 906, FileName: "checklist.md", Link: "https://files.example.com/checklist.md"}}
	wantSubtasks := []kanbanize.Subtask{stepOne, stepTwo}

	for _, p := range compare("card", reflect.ValueOf(d.Card), reflect.ValueOf(wantCard)) {
		t.Error(p)
	}
	for _, p := range compare("comments", reflect.ValueOf(d.Comments), reflect.ValueOf(wantComments)) {
		t.Error(p)
	}
	for _, p := range compare("subtasks", reflect.ValueOf(d.Subtasks), reflect.ValueOf(wantSubtasks)) {
		t.Error(p)
	}
	if !d.Comments[1].IsEmail() || !d.Comments[2].IsEmail() || d.Comments[0].IsEmail() {
		t.Errorf("IsEmail of the plain, sent and received comments = %v, %v, %v; want false, true, true",
			d.Comments[0].IsEmail(), d.Comments[1].IsEmail(), d.Comments[2].IsEmail())
	}

	// No member is lost: each is in the encoding of what was read, under
	// its name, but the watchers under the one name the client writes.
	for _, tt := range []struct {
		endpoint string
		read     any
		renamed  map[string]string
	}{
		{"card", d.Card, map[string]string{".watchers_ids": ".watcher_ids"}},
		{"comments", d.Comments, nil},
		{"subtasks", d.Subtasks, nil},
	} {
		var sent struct{ Data any }
		if err := json.Unmarshal(bodies[tt.endpoint], &sent); err != nil {
			t.Fatal(err)
		}
		encoded, err := json.Marshal(tt.read)
		if err != nil {
			t.Fatal(err)
		}
		var back any
		if err := json.Unmarshal(encoded, &back); err != nil {
			t.Fatal(err)
		}
		have := members("", back)
		for _, m := range members("", sent.Data) {
			if r, ok := tt.renamed[m]; ok {
				m = r
			}
			if !slices.Contains(have, m) {
				t.Errorf("%s: the member %s is missing from the encoding of what was read:\n%s", tt.endpoint, m, encoded)
			}
		}
	}
	if js, _ := json.Marshal(d.Card); bytes.Contains(js, []byte("watchers_ids")) {
		t.Errorf("the encoded card writes watchers_ids, want watcher_ids only: %s", js)
	}
}

// members lists the paths of the object members in v, such as
// ".linked_cards[].card_id", each once.
func members(path string, v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			out = append(out, path+"."+k)
			out = append(out, members(path+"."+k, x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, members(path+"[]", x)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// compare lists the differences between got and want, field by field:
// timestamps compare as instants, raw JSON compacted, pointers by what
// they point at.
func compare(path string, got, want reflect.Value) []string {
	if got.Type() == reflect.TypeFor[kanbanize.Time]() {
		g, w := got.Interface().(kanbanize.Time), want.Interface().(kanbanize.Time)
		if !g.Equal(w.Time) {
			return []string{fmt.Sprintf("%s = %v, want %v", path, g, w)}
		}
		return nil
	}
	if got.Type() == reflect.TypeFor[json.RawMessage]() {
		var g, w bytes.Buffer
		_ = json.Compact(&g, got.Bytes())
		_ = json.Compact(&w, want.Bytes())
		if g.String() != w.String() {
			return []string{fmt.Sprintf("%s = %s, want %s", path, g.String(), w.String())}
		}
		return nil
	}
	switch got.Kind() {
	case reflect.Pointer:
		if got.IsNil() || want.IsNil() {
			if got.IsNil() != want.IsNil() {
				return []string{fmt.Sprintf("%s = %v, want %v", path, describe(got), describe(want))}
			}
			return nil
		}
		return compare(path, got.Elem(), want.Elem())
	case reflect.Struct:
		var out []string
		for i := range got.NumField() {
			name := got.Type().Field(i).Tag.Get("json")
			name, _, _ = strings.Cut(name, ",")
			out = append(out, compare(path+"."+name, got.Field(i), want.Field(i))...)
		}
		return out
	case reflect.Slice:
		if got.IsNil() != want.IsNil() || got.Len() != want.Len() {
			return []string{fmt.Sprintf("%s has %s, want %s", path, describe(got), describe(want))}
		}
		var out []string
		for i := range got.Len() {
			out = append(out, compare(fmt.Sprintf("%s[%d]", path, i), got.Index(i), want.Index(i))...)
		}
		return out
	}
	if !got.Equal(want) {
		return []string{fmt.Sprintf("%s = %#v, want %#v", path, got.Interface(), want.Interface())}
	}
	return nil
}

// describe is v in a few words for compare's messages.
func describe(v reflect.Value) string {
	switch {
	case v.Kind() == reflect.Slice && v.IsNil():
		return "nil"
	case v.Kind() == reflect.Slice:
		return fmt.Sprintf("%d items", v.Len())
	case v.IsNil():
		return "nil"
	}
	return fmt.Sprintf("%v", v.Elem().Interface())
}
