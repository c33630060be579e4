package kanbanizetest

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
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
		oldWatchers  bool // "watchers_ids"
		emails       int  // comments sent or received as email
	}{
		{id: 100, title: "Set up CI pipeline"},
		{id: 101, title: "Fix login redirect loop", comments: 1, subtasks: 1, plusTimezone: true, oldWatchers: true},
		{id: 102, title: "Migrate invoices to the new schema", comments: 2, subtasks: 2, finished: 1},
		{id: 103, title: "Add rate limit dashboard", comments: 3, subtasks: 3, finished: 1, hasExtra: true, plusTimezone: true, emails: 1},
		{id: 104, title: "Write onboarding guide", comments: 4, oldWatchers: true, emails: 2},
		{id: 105, title: "Upgrade Go toolchain", subtasks: 1, plusTimezone: true},
		{id: 110, title: "Set up CI pipeline #2", subtasks: 2, oldWatchers: true},
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
		if c.OldWatchersKey != tt.oldWatchers {
			t.Errorf("card %d OldWatchersKey = %v, want %v", tt.id, c.OldWatchersKey, tt.oldWatchers)
		}
		emails := 0
		for _, cm := range fx.Comments {
			if cm.Sender != nil {
				emails++
			}
		}
		if emails != tt.emails {
			t.Errorf("card %d has %d email comments, want %d", tt.id, emails, tt.emails)
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
	c := fx.Card
	ts := []string{c.CreatedAt, c.LastModified, c.InCurrentPositionSince}
	add := func(p *string) {
		if p != nil {
			ts = append(ts, *p)
		}
	}
	for _, p := range []*string{c.Deadline, c.FirstRequestTime, c.FirstStartTime, c.FirstEndTime,
		c.LastRequestTime, c.LastStartTime, c.LastEndTime, c.ChildCardStats.LastUnfinishedChildCardDeadline} {
		add(p)
	}
	for _, a := range c.Annotations {
		ts = append(ts, a.CreatedAt)
	}
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
		old     bool   // OldWatchersKey
		want    string // a substring of the encoding
		wantErr string
	}{
		{name: "no extra", give: nil, want: `"unfinished_subtask_count":0}`},
		{name: "extra merged", give: map[string]any{"version": 3, "a": true}, want: `"unfinished_subtask_count":0,"a":true,"version":3}`},
		{name: "extra repeats a field", give: map[string]any{"title": "x"}, wantErr: `Card.Extra["title"] repeats a standard card field`},
		{name: "extra cannot encode", give: map[string]any{"f": func() {}}, wantErr: "Card.Extra: json: unsupported type"},
		{name: "old watchers key", old: true, want: `"watchers_ids":[3,11]}`},
		{name: "old watchers key and extra", old: true, give: map[string]any{"version": 3}, want: `"watchers_ids":[3,11],"version":3}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(Card{CardID: 1, WatcherIDs: []int{3, 11}, OldWatchersKey: tt.old, Extra: tt.give})
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
			if n := strings.Count(string(b), `"watcher_ids"`) + strings.Count(string(b), `"watchers_ids"`); n != 1 {
				t.Errorf("json.Marshal(Card) = %s, want the watchers once", b)
			}
			var back Card
			if err := json.Unmarshal(b, &back); err != nil || back.OldWatchersKey != tt.old || !slices.Equal(back.WatcherIDs, []int{3, 11}) {
				t.Errorf("%s reads back with OldWatchersKey %v and watchers %v (%v), want %v and [3 11]", b, back.OldWatchersKey, back.WatcherIDs, err, tt.old)
			}
		})
	}
}

// TestFixturesFollowThePublishedShapes: comments are plain, with an
// internal author, or sent or received as email, with a sender and
// recipients; people are internal users or external addresses; cards
// embed their subtasks, reach each section of their timeline in order,
// spell their watchers both ways across fixtures, and link children and
// parents both ways.
func TestFixturesFollowThePublishedShapes(t *testing.T) {
	fxs := Fixtures(DefaultCards)
	byID := map[int]Card{}
	for _, fx := range fxs {
		byID[fx.Card.CardID] = fx.Card
	}
	seen := map[string]int{}
	checkPerson := func(where string, u UserRef) {
		switch {
		case u.Type == PersonInternal && u.UserID > 0 && u.Email == "":
		case u.Type == PersonExternal && strings.Contains(u.Email, "@") && u.UserID == 0:
		default:
			t.Errorf("%s = %+v, want an internal user ID or an external address", where, u)
		}
	}
	var oldWatchers, newWatchers int
	for _, fx := range fxs {
		c := fx.Card
		for _, cm := range fx.Comments {
			where := "comment " + strconv.Itoa(cm.CommentID)
			seen[cm.Type]++
			switch cm.Type {
			case CommentPlain:
				if cm.Author == nil || cm.Sender != nil || cm.Recipients != nil || cm.Author.Type != PersonInternal {
					t.Errorf("%s is plain with author %+v, sender %+v, recipients %+v; want an internal author only", where, cm.Author, cm.Sender, cm.Recipients)
					continue
				}
				checkPerson(where+" author", *cm.Author)
			case CommentSentAsEmail, CommentReceivedAsEmail:
				if cm.Author != nil || cm.Sender == nil || cm.Recipients == nil || len(cm.Recipients.To) == 0 {
					t.Errorf("%s is %q with author %+v, sender %+v, recipients %+v; want a sender and recipients instead of an author",
						where, cm.Type, cm.Author, cm.Sender, cm.Recipients)
					continue
				}
				if wantSender := map[string]string{CommentSentAsEmail: PersonInternal, CommentReceivedAsEmail: PersonExternal}[cm.Type]; cm.Sender.Type != wantSender {
					t.Errorf("%s is %q from %+v, want a sender of type %s", where, cm.Type, cm.Sender, wantSender)
				}
				checkPerson(where+" sender", *cm.Sender)
				for _, list := range [][]UserRef{cm.Recipients.To, cm.Recipients.CC, cm.Recipients.BCC} {
					for _, u := range list {
						checkPerson(where+" recipient", u)
					}
				}
			default:
				t.Errorf("%s has the type %q, want one of the API's", where, cm.Type)
			}
			for _, a := range cm.Attachments {
				if a.Position != nil {
					t.Errorf("%s has a numbered attachment %+v, want comments' attachments unnumbered", where, a)
				}
			}
		}
		if !reflect.DeepEqual(c.Subtasks, fx.Subtasks) {
			t.Errorf("card %d embeds the subtasks %+v, want its fixture's %+v", c.CardID, c.Subtasks, fx.Subtasks)
		}
		for _, a := range c.Attachments {
			if a.Position == nil {
				t.Errorf("card %d has an unnumbered attachment %+v", c.CardID, a)
			}
		}
		if c.OldWatchersKey {
			oldWatchers++
		} else {
			newWatchers++
		}
		checkTimeline(t, c)
		for _, l := range c.LinkedCards {
			other, ok := byID[l.CardID]
			back := map[string]string{"child": "parent", "parent": "child"}[l.LinkType]
			if !ok || !slices.Contains(other.LinkedCards, LinkedCard{CardID: c.CardID, LinkType: back}) {
				t.Errorf("card %d links card %d as its %s, which does not link it back as its %s", c.CardID, l.CardID, l.LinkType, back)
			}
			if l.LinkType == "child" && c.ChildCardStats.ChildCardSizeSum != derefInt(other.Size) {
				t.Errorf("card %d: child card size sum %d, want its child's size %d", c.CardID, c.ChildCardStats.ChildCardSizeSum, derefInt(other.Size))
			}
		}
	}
	if seen[CommentPlain] == 0 || seen[CommentSentAsEmail] == 0 || seen[CommentReceivedAsEmail] == 0 || oldWatchers == 0 || newWatchers == 0 {
		t.Errorf("fixtures have comments %v and %d/%d cards with watchers_ids/watcher_ids, want some of each", seen, oldWatchers, newWatchers)
	}
}

// checkTimeline checks that c entered each section it reached, in order,
// and no other, before its last modification.
func checkTimeline(t *testing.T, c Card) {
	t.Helper()
	parse := func(s *string) time.Time {
		if s == nil {
			return time.Time{}
		}
		v, err := time.Parse(time.RFC3339, *s)
		if err != nil {
			t.Fatalf("card %d: %v", c.CardID, err)
		}
		return v
	}
	created, modified, since := parse(&c.CreatedAt), parse(&c.LastModified), parse(&c.InCurrentPositionSince)
	steps := []struct {
		name        string
		first, last *string
		reached     bool
	}{
		{"request", c.FirstRequestTime, c.LastRequestTime, c.Section >= 2},
		{"start", c.FirstStartTime, c.LastStartTime, c.Section >= 3},
		{"end", c.FirstEndTime, c.LastEndTime, c.Section >= 4},
	}
	prev := created
	for _, s := range steps {
		if (s.first != nil) != s.reached || (s.last != nil) != s.reached {
			t.Errorf("card %d in section %d has %s times %v and %v, want them set: %v", c.CardID, c.Section, s.name, s.first, s.last, s.reached)
			continue
		}
		if !s.reached {
			continue
		}
		first, last := parse(s.first), parse(s.last)
		if first.Before(prev) || last.Before(first) || modified.Before(last) {
			t.Errorf("card %d: %s first %v, last %v after %v, modified %v; want them in order", c.CardID, s.name, first, last, prev, modified)
		}
		prev = last
	}
	if !since.Equal(prev) {
		t.Errorf("card %d in current position since %v, want its last section entry %v", c.CardID, since, prev)
	}
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}
