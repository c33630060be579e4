package kanbanizetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFixturesFacts(t *testing.T) {
	// Other packages' tests rely on these; change them with care.
	tests := []struct {
		id           int
		title        string
		comments     int
		subtasks     int
		finished     int
		hasExtra     bool
		plusTimezone bool
	}{
		{id: 100, title: "Set up CI pipeline"},
		{id: 101, title: "Fix login redirect loop", comments: 1, subtasks: 1, plusTimezone: true},
		{id: 102, title: "Migrate invoices to the new schema", comments: 2, subtasks: 2, finished: 1},
		{id: 103, title: "Add rate limit dashboard", comments: 3, subtasks: 3, finished: 1, hasExtra: true, plusTimezone: true},
		{id: 104, title: "Write onboarding guide", comments: 4},
		{id: 105, title: "Upgrade Go toolchain", subtasks: 1, plusTimezone: true},
		{id: 110, title: "Set up CI pipeline #2", subtasks: 2},
	}
	fxs := Fixtures(11)
	for _, tt := range tests {
		fx := fxs[tt.id-FirstCardID]
		c := fx.Card
		if c.CardID != tt.id || c.Title != tt.title {
			t.Errorf("Fixtures(11)[%d] = card %d %q, want card %d %q", tt.id-FirstCardID, c.CardID, c.Title, tt.id, tt.title)
		}
		if len(fx.Comments) != tt.comments || len(fx.Subtasks) != tt.subtasks {
			t.Errorf("card %d has %d comments and %d subtasks, want %d and %d", tt.id, len(fx.Comments), len(fx.Subtasks), tt.comments, tt.subtasks)
		}
		if c.FinishedSubtaskCount != tt.finished || c.UnfinishedSubtaskCount != tt.subtasks-tt.finished {
			t.Errorf("card %d counts %d finished and %d unfinished subtasks, want %d and %d",
				tt.id, c.FinishedSubtaskCount, c.UnfinishedSubtaskCount, tt.finished, tt.subtasks-tt.finished)
		}
		if got := c.Extra != nil; got != tt.hasExtra {
			t.Errorf("card %d has Extra = %v, want %v", tt.id, got, tt.hasExtra)
		}
		if got := strings.HasSuffix(c.CreatedAt, "+00:00"); got != tt.plusTimezone {
			t.Errorf("card %d created_at = %q, want a +00:00 offset: %v", tt.id, c.CreatedAt, tt.plusTimezone)
		}
	}
}

func TestFixturesAreConsistent(t *testing.T) {
	fxs := Fixtures(DefaultCards)
	if len(fxs) != DefaultCards {
		t.Fatalf("len(Fixtures(%d)) = %d", DefaultCards, len(fxs))
	}
	titlesSeen := make(map[string]bool)
	var finished, unfinished, blocked int
	for i, fx := range fxs {
		c := fx.Card
		if c.CardID != FirstCardID+i {
			t.Errorf("Fixtures(%d)[%d].Card.CardID = %d, want %d", DefaultCards, i, c.CardID, FirstCardID+i)
		}
		if titlesSeen[c.Title] {
			t.Errorf("card %d repeats the title %q", c.CardID, c.Title)
		}
		titlesSeen[c.Title] = true
		if len(fx.Comments) > 4 || len(fx.Subtasks) > 3 {
			t.Errorf("card %d has %d comments and %d subtasks, want at most 4 and 3", c.CardID, len(fx.Comments), len(fx.Subtasks))
		}
		var f int
		for _, st := range fx.Subtasks {
			if st.FinishedAt != nil {
				f++
			}
		}
		if c.FinishedSubtaskCount != f || c.UnfinishedSubtaskCount != len(fx.Subtasks)-f {
			t.Errorf("card %d counts %d/%d finished/unfinished subtasks, want %d/%d",
				c.CardID, c.FinishedSubtaskCount, c.UnfinishedSubtaskCount, f, len(fx.Subtasks)-f)
		}
		finished += f
		unfinished += len(fx.Subtasks) - f
		blocked += c.IsBlocked
		for _, ts := range timestamps(fx) {
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				t.Errorf("card %d has the time %q: %v", c.CardID, ts, err)
			}
		}
		if _, err := json.Marshal(c); err != nil {
			t.Errorf("json.Marshal(card %d) = %v", c.CardID, err)
		}
	}
	if finished == 0 || unfinished == 0 || blocked == 0 {
		t.Errorf("fixtures have %d finished and %d unfinished subtasks and %d blocked cards, want some of each", finished, unfinished, blocked)
	}
	if !reflect.DeepEqual(Fixtures(DefaultCards), fxs) {
		t.Errorf("Fixtures(%d) differs from one call to the next, want it deterministic", DefaultCards)
	}
}

// timestamps returns every time in fx.
func timestamps(fx CardFixture) []string {
	ts := []string{fx.Card.CreatedAt, fx.Card.LastModified}
	add := func(p *string) {
		if p != nil {
			ts = append(ts, *p)
		}
	}
	add(fx.Card.Deadline)
	for _, c := range fx.Comments {
		ts = append(ts, c.CreatedAt)
		add(c.LastModified)
	}
	for _, s := range fx.Subtasks {
		add(s.FinishedAt)
		add(s.Deadline)
	}
	return ts
}

func TestFixturesOfNothing(t *testing.T) {
	for _, n := range []int{0, -1} {
		if got := Fixtures(n); got == nil || len(got) != 0 {
			t.Errorf("Fixtures(%d) = %#v, want an empty, non-nil slice", n, got)
		}
	}
	s := New(Config{Cards: Fixtures(0)})
	if r := get(t, s, "/cards/100"); r.status != 404 {
		t.Errorf("GET /cards/100 with Cards: Fixtures(0) = %d, want 404", r.status)
	}
}

func TestCardMarshalJSON(t *testing.T) {
	tests := []struct {
		name    string
		give    map[string]any
		want    string // a substring of the encoding
		wantErr string
	}{
		{name: "no extra", give: nil, want: `"unfinished_subtask_count":0}`},
		{name: "extra merged", give: map[string]any{"version": 3, "a": true}, want: `"unfinished_subtask_count":0,"a":true,"version":3}`},
		{name: "extra repeats a field", give: map[string]any{"title": "x"}, wantErr: `Card.Extra["title"] repeats a standard card field`},
		{name: "extra cannot encode", give: map[string]any{"f": func() {}}, wantErr: "Card.Extra: json: unsupported type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Card{CardID: 1, Extra: tt.give})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("json.Marshal(Card) = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(string(b), tt.want) {
				t.Errorf("json.Marshal(Card) = %s, %v, want it to contain %s", b, err, tt.want)
			}
			if !json.Valid(b) {
				t.Errorf("json.Marshal(Card) = %s, want valid JSON", b)
			}
		})
	}
}
