package kanbanize_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise/kanbanize"
)

// shownInput is the input a card-reference error quotes.
func shownInput(t *testing.T, err error) string {
	t.Helper()
	msg := err.Error()
	prefix := kanbanize.ErrBadCardID.Error() + ": "
	end := strings.LastIndex(msg, " (want a number")
	if !strings.HasPrefix(msg, prefix) || end < len(prefix) {
		return msg
	}
	shown, uerr := strconv.Unquote(msg[len(prefix):end])
	if uerr != nil {
		t.Fatalf("error %q does not quote the input", msg)
	}
	return shown
}

// FuzzCardURL reads card URLs built from a fuzzed host, path, query and
// fragment.
func FuzzCardURL(f *testing.F) {
	for _, s := range [][4]string{
		{"acme.kanbanize.com", "/ctrl_board/12/cards/345/details/", "", ""},
		{"x.businessmap.io", "/ctrl_board/8/cards/1", "tab=comments", "top"},
		{"ACME.Kanbanize.com:443", "/cards/007", "", ""},
		{"acme.kanbanize.com", "/cards/99999999999", "apikey=SECRET-TOKEN-1", ""},
		{"acme.kanbanize.com", "/cards/999999999999999999999", "", ""},
		{"acme.kanbanize.com", "/cards/-5/details", "", ""},
		{"acme.kanbanize.com", "/cards/3.5", "", ""},
		{"acme.kanbanize.com", "/%zz/cards/345", "apikey=SECRET-TOKEN-2", ""},
		{"u:SECRET-PASSWORD@acme.kanbanize.com", "/%zz", "", ""},
		{"u:SECRET-PASSWORD@acme.kanbanize.com", "/cards/", "", "frag"},
		{"acme.kanbanize.com.evil.io", "/cards/345", "", ""},
		{"kanbanize.com", "/cards/345", "", ""},
		{"-acme.kanbanize.com", "/cards/345", "", ""},
		{"acme.kanbanize.com", "/cards/%33%34%35", "", "%zz"},
		{"acme.kanbanize.com", "/cards/345\x00", "a\x7fb", ""},
		{"", "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, host, path, query, fragment string) {
		in := "https://" + host + path
		if query != "" {
			in += "?" + query
		}
		if fragment != "" {
			in += "#" + fragment
		}
		id, err := kanbanize.ParseCardID(in)
		if err != nil {
			if !errors.Is(err, kanbanize.ErrBadCardID) || id != 0 {
				t.Fatalf("ParseCardID(%q) = %v, %v; a refusal must be ErrBadCardID with 0", in, id, err)
			}
			// A pasted URL may carry a token in its user info or query:
			// the error must not quote them.
			shown := shownInput(t, err)
			if strings.ContainsAny(host+path+query, "#") {
				return // the query is then, in part, the fragment
			}
			plainPath, _ := url.PathUnescape(path)
			elsewhere := "https://" + host + path + plainPath + fragment + "…"
			if len(query) >= 4 && !strings.Contains(elsewhere, query) && strings.Contains(shown, query) {
				t.Fatalf("ParseCardID(%q): the error quotes the query: %v", in, err)
			}
			if at := strings.LastIndex(host, "@"); at >= 4 && !strings.ContainsAny(host[:at], "/?") {
				userinfo := host[:at]
				if !strings.Contains(host[at:]+path+plainPath+query+fragment+"…", userinfo) && strings.Contains(shown, userinfo) {
					t.Fatalf("ParseCardID(%q): the error quotes the user info: %v", in, err)
				}
			}
			return
		}
		if id <= 0 {
			t.Fatalf("ParseCardID(%q) = %v, want a positive ID", in, id)
		}
		// The ID formats back to what reads as the same card, as a
		// number and as a card URL.
		for _, ref := range []string{id.String(), "https://acme.kanbanize.com/ctrl_board/1/cards/" + id.String() + "/details/"} {
			if again, err := kanbanize.ParseCardID(ref); err != nil || again != id {
				t.Fatalf("ParseCardID(%q) = %v; %q reads as %v, %v", in, id, ref, again, err)
			}
		}
		u, err := url.Parse(in)
		if err != nil {
			t.Fatalf("ParseCardID(%q) accepted what url.Parse refuses: %v", in, err)
		}
		hostname := strings.ToLower(u.Hostname())
		if !strings.HasSuffix(hostname, ".kanbanize.com") && !strings.HasSuffix(hostname, ".businessmap.io") {
			t.Fatalf("ParseCardID(%q) = %v from the host %q", in, id, hostname)
		}
		if !strings.Contains(u.Path+"/", "cards/") {
			t.Fatalf("ParseCardID(%q) = %v from the path %q, which names no card", in, id, u.Path)
		}
		// The query and fragment do not choose the card.
		if !strings.ContainsAny(host+path, "?#") {
			if bare, err := kanbanize.ParseCardID("https://" + host + path); err != nil || bare != id {
				t.Fatalf("ParseCardID(%q) = %v, but without query and fragment %v, %v", in, id, bare, err)
			}
		}
	})
}

// roundTripFunc is a base transport made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

const fuzzKey = "fuzz-key-5c1d0e77"

// readCardServing reads card 345 through a client whose API answers each
// endpoint 200 with the body body returns for it.
func readCardServing(t *testing.T, body func(endpoint string) []byte) (*kanbanize.CardDetails, error) {
	t.Helper()
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		endpoint := "card"
		if _, last, _ := strings.Cut(req.URL.Path, "/cards/345/"); last != "" {
			endpoint = last
		}
		b := body(endpoint)
		return &http.Response{
			StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header:        http.Header{"Content-Type": {"application/json"}},
			Body:          io.NopCloser(bytes.NewReader(b)),
			ContentLength: int64(len(b)),
			Request:       req,
		}, nil
	})
	c, err := kanbanize.NewClient("acme", fuzzKey, kanbanize.WithHTTPClient(&http.Client{Transport: base}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := c.ReadCard(ctx, "345")
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("ReadCard hung: %v", err)
	case (d == nil) == (err == nil):
		t.Fatalf("ReadCard = %v, %v; want a card or an error", d, err)
	case err != nil && strings.Contains(err.Error(), fuzzKey):
		t.Fatalf("ReadCard error shows the API key: %v", err)
	}
	return d, err
}

var fixedBodies = map[string]string{
	"card":     `{"data":{"card_id":345,"title":"Fixed"}}`,
	"comments": `{"data":[]}`,
	"subtasks": `{"data":[]}`,
}

// onlyKey returns the value of key in obj, and false when another key
// matches it too: encoding/json matches keys ignoring case.
func onlyKey(obj map[string]any, key string) (any, bool) {
	for k := range obj {
		if k != key && strings.EqualFold(k, key) {
			return nil, false
		}
	}
	v, ok := obj[key]
	return v, ok
}

// FuzzReadCardBody serves a fuzzed body to one of the three requests of
// ReadCard, valid ones to the others.
func FuzzReadCardBody(f *testing.F) {
	for _, s := range []struct {
		endpoint uint8
		body     string
	}{
		{0, `{"data":{"card_id":345,"title":"Odd","custom_id":17,"size":"2.5","is_blocked":"1","created_at":"2026-01-07 11:00:00"}}`},
		{0, `{"data":{"card_id":"99999999999","title":"x","deadline":"9999-12-31T23:59:59Z","position":2.0}}`},
		{0, `{"data":{"card_id":99999999999999999999}}`},
		{0, `{"data":{"card_id":-5,"size":-0.5,"priority":"-1","section":1e400}}`},
		{0, `{"data":null}`},
		{0, `{"data":{}} trailing`},
		{0, `{"data":{"title":"a","Title":"b","TITLE":"c"}}`},
		{0, `{"data":{"created_at":"\t2026-01-07"}}`},
		{0, `{"data":{"card_id":345,"watchers_ids":["3"],"watcher_ids":[3,4],"linked_cards":[{"card_id":"12","link_type":"child","position":"1"}],"child_card_stats":{"child_card_size_sum":"2.5","has_unfinished_child_cards":1,"last_unfinished_child_card_deadline":""},"revision":"7","first_start_time":"2026-01-07 11:00:00","attachments":[{"id":1,"position":null}],"subtasks":[{"subtask_id":2,"finished_at":null}]}}`},
		{0, `{"data":{"card_id":345,"watchers_ids":{},"linked_cards":null,"cover_image":[],"stickers":[1],"annotations":[{"thread_id":5}]}}`},
		{1, `{"data":[{"comment_id":1,"text":"<p>hi</p>","author":{"type":"user","value":2},"created_at":"2026-01-09T11:00:00+00:00"}]}`},
		{1, `{"data":[{"comment_id":2,"type":"sent as email","sender":{"type":"internal","value":7},"recipients":{"to":[{"type":"external","value":"a@x.example"}],"cc":["b@x.example"],"bcc":[7]}},{"comment_id":3,"sender":"c@x.example","recipients":[{"name":"D"}]}]}`},
		{1, `{"data":[{"comment_id":4,"sender":{"type":7},"recipients":{"to":{}}}]}`},
		{1, `{"data":[{"comment_id":"\u0031"}]}`},
		{1, `{"data":{"comment_id":1}}`},
		{2, `{"data":[{"subtask_id":2,"finished_at":"2026-01-09","deadline":""},{"subtask_id":3,"finished_at":null}]}`},
		{2, `{"data":[{"subtask_id":2,"finished_at":"0000-00-00 00:00:00"}]}`},
		{2, "{\"data\":[\x00]}"},
		{0, ``},
		{1, `[`},
		{2, `{"error":"unauthorized"}`},
	} {
		f.Add(s.endpoint, []byte(s.body))
	}
	endpoints := []string{"card", "comments", "subtasks"}
	f.Fuzz(func(t *testing.T, endpoint uint8, body []byte) {
		fuzzed := endpoints[int(endpoint)%len(endpoints)]
		d, err := readCardServing(t, func(e string) []byte {
			if e == fuzzed {
				return body
			}
			return []byte(fixedBodies[e])
		})
		if err != nil {
			return
		}
		// What is read encodes in its canonical form, which reads back
		// the same.
		first, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("encoding %+v: %v", d, err)
		}
		var again kanbanize.CardDetails
		if err := json.Unmarshal(first, &again); err != nil {
			t.Fatalf("the encoded card does not decode: %v\n%s", err, first)
		}
		if second, err := json.Marshal(again); err != nil || !bytes.Equal(first, second) {
			t.Fatalf("the encoding is not stable:\n%s\n%s (%v)", first, second, err)
		}

		// Fields of the right shape come through as they are.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var answer struct{ Data any }
		if err := dec.Decode(&answer); err != nil {
			t.Fatalf("ReadCard accepted a %s body that is not JSON: %q", fuzzed, body)
		}
		switch data := answer.Data.(type) {
		case map[string]any:
			if fuzzed != "card" {
				break
			}
			if v, ok := onlyKey(data, "card_id"); ok {
				var want int64
				var known bool
				switch v := v.(type) {
				case json.Number:
					want, err = v.Int64()
					known = err == nil
				case string:
					want, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					known = err == nil
				}
				if known && int64(d.Card.CardID) != want {
					t.Fatalf("card_id %v read as %v", v, d.Card.CardID)
				}
			}
			if v, ok := onlyKey(data, "title"); ok {
				if s, isString := v.(string); isString && d.Card.Title != s {
					t.Fatalf("title %q read as %q", s, d.Card.Title)
				}
			}
		case []any:
			switch fuzzed {
			case "comments":
				if len(d.Comments) != len(data) {
					t.Fatalf("%d comments read as %d", len(data), len(d.Comments))
				}
			case "subtasks":
				if len(d.Subtasks) != len(data) {
					t.Fatalf("%d subtasks read as %d", len(data), len(d.Subtasks))
				}
			}
		}
	})
}

// jsonString is s as a JSON string holds it: invalid UTF-8 replaced.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantTime is what a timestamp field holding s reads as, and false when
// it is no timestamp.
func wantTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if s == "" || s == "null" {
		return time.Time{}, true
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if v, err := time.Parse(layout, s); err == nil {
			return v, true
		}
	}
	return time.Time{}, false
}

// FuzzReadCardFields serves well-formed answers whose fields are fuzzed,
// and checks that each reads as sent: the card's title, IDs, creation,
// position timestamp, watcher under either spelling and linked card; a
// plain comment's text and an email comment's sender and recipient; a
// subtask's finish.
func FuzzReadCardFields(f *testing.F) {
	for _, s := range []struct {
		id                                   int64
		idAsString                           bool
		title, customID, created, text, done string
		watcher                              int64
		oldWatchersKey                       bool
		since, linkType, sender              string
	}{
		{345, false, "Fix the login", "PRJ-17", "2026-01-07T11:00:00Z", "<p>done</p>", "2026-01-09",
			7, false, "2026-01-08T09:00:00+00:00", "child", "ops@vendor.example"},
		{99999999999, true, "", "", "", "", "", 0, true, "", "", ""},
		{-1, false, "\x00\x1b[31m", "17", "9999-12-31 23:59:59", "\xff\xfe", "null",
			-3, true, "null", "\x00", "\xff"},
		{9223372036854775807, true, "\"quoted\"", "\\", "2026-01-07T11:00:00.123456789+05:30", "\u2028", " 2026-01-09 ",
			9223372036854775807, false, "2026-01-07 11:00:00", "predecessor", "\"Ops\" <ops@vendor.example>"},
		{1, false, "t", "x", "\t2026-01-07", "c", "2026-02-30", 1, false, "2026-01-07", "parent", "a@b"},
		{2, true, "t", "x", "2026-01-07T25:00:00", "c", "0001-01-01T00:00:00Z", 2, true, "2026-13-01", "relative", "a@b"},
		{3, false, "t", "x", "\"2026-01-07\"", "c", "2026-01-07\n", 3, false, "\"2026-01-07\"", "successor", ""},
	} {
		f.Add(s.id, s.idAsString, s.title, s.customID, s.created, s.text, s.done, s.watcher, s.oldWatchersKey, s.since, s.linkType, s.sender)
	}
	f.Fuzz(func(t *testing.T, id int64, idAsString bool, title, customID, created, text, done string,
		watcher int64, oldWatchersKey bool, since, linkType, sender string) {
		var cardID any = id
		if idAsString {
			cardID = strconv.FormatInt(id, 10)
		}
		watchersKey := "watcher_ids"
		if oldWatchersKey {
			watchersKey = "watchers_ids"
		}
		bodies := map[string]any{
			"card": map[string]any{"card_id": cardID, "title": title, "custom_id": customID, "created_at": created,
				"in_current_position_since": since, watchersKey: []int64{watcher},
				"linked_cards": []any{map[string]any{"card_id": 7, "link_type": linkType}}},
			"comments": []any{
				map[string]any{"comment_id": 1, "text": text},
				map[string]any{"comment_id": 2, "type": "received as email", "sender": map[string]any{"type": "external", "value": sender},
					"recipients": map[string]any{"to": []any{map[string]any{"type": "internal", "value": watcher}}}},
			},
			"subtasks": []any{map[string]any{"subtask_id": 2, "finished_at": done}},
		}
		d, err := readCardServing(t, func(endpoint string) []byte {
			b, err := json.Marshal(map[string]any{"data": bodies[endpoint]})
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
		wantCreated, createdOK := wantTime(jsonString(t, created))
		wantDone, doneOK := wantTime(jsonString(t, done))
		wantSince, sinceOK := wantTime(jsonString(t, since))
		if !createdOK || !doneOK || !sinceOK {
			if err == nil {
				t.Fatalf("created_at %q, finished_at %q and in_current_position_since %q read as %v, %v and %v; want an error",
					created, done, since, d.Card.CreatedAt, d.Subtasks[0].FinishedAt, d.Card.InCurrentPositionSince)
			}
			return
		}
		if err != nil {
			t.Fatalf("ReadCard of well-formed answers: %v", err)
		}
		var gotSender string
		var gotRecipient int64
		if len(d.Comments) == 2 && d.Comments[1].Sender != nil {
			_ = json.Unmarshal(d.Comments[1].Sender.Value, &gotSender)
		}
		if len(d.Comments) == 2 && d.Comments[1].Recipients != nil && len(d.Comments[1].Recipients.To) == 1 {
			_ = json.Unmarshal(d.Comments[1].Recipients.To[0].Value, &gotRecipient)
		}
		switch {
		case int64(d.Card.CardID) != id:
			t.Fatalf("card_id %v read as %v", cardID, d.Card.CardID)
		case d.Card.Title != jsonString(t, title):
			t.Fatalf("title %q read as %q", title, d.Card.Title)
		case string(d.Card.CustomID) != jsonString(t, customID):
			t.Fatalf("custom_id %q read as %q", customID, d.Card.CustomID)
		case !d.Card.CreatedAt.Equal(wantCreated):
			t.Fatalf("created_at %q read as %v, want %v", created, d.Card.CreatedAt, wantCreated)
		case !d.Card.InCurrentPositionSince.Equal(wantSince):
			t.Fatalf("in_current_position_since %q read as %v, want %v", since, d.Card.InCurrentPositionSince, wantSince)
		case len(d.Card.WatcherIDs) != 1 || int64(d.Card.WatcherIDs[0]) != watcher:
			t.Fatalf("%s [%d] read as watchers %v", watchersKey, watcher, d.Card.WatcherIDs)
		case len(d.Card.LinkedCards) != 1 || d.Card.LinkedCards[0].CardID != 7 || d.Card.LinkedCards[0].LinkType != jsonString(t, linkType):
			t.Fatalf("linked card 7 of type %q read as %+v", linkType, d.Card.LinkedCards)
		case len(d.Comments) != 2 || d.Comments[0].Text != jsonString(t, text) || d.Comments[0].IsEmail():
			t.Fatalf("comment %q read as %+v", text, d.Comments)
		case !d.Comments[1].IsEmail() || d.Comments[1].Sender.Type != "external" || gotSender != jsonString(t, sender) || gotRecipient != watcher:
			t.Fatalf("email from %q to user %d read as %+v (sender %q, recipient %d)", sender, watcher, d.Comments[1], gotSender, gotRecipient)
		case len(d.Subtasks) != 1 || !d.Subtasks[0].FinishedAt.Equal(wantDone) || d.Subtasks[0].Finished() != !wantDone.IsZero():
			t.Fatalf("finished_at %q read as %+v, want %v", done, d.Subtasks, wantDone)
		}
	})
}
