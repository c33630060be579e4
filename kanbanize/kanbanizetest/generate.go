package kanbanizetest

import (
	"fmt"
	"time"
)

// FirstCardID is the ID of the first card [Fixtures] makes; the others
// follow it: 100, 101, 102, …
const FirstCardID = 100

// titles are cycled through by Fixtures; past the tenth card a title gets
// a suffix " #2", " #3", … so that every title is unique.
var titles = [...]string{
	"Set up CI pipeline",
	"Fix login redirect loop",
	"Migrate invoices to the new schema",
	"Add rate limit dashboard",
	"Write onboarding guide",
	"Upgrade Go toolchain",
	"Investigate slow board loads",
	"Archive stale cards",
	"Translate settings page",
	"Review API error codes",
}

// fixtureEpoch is when the first fixture card was created.
var fixtureEpoch = time.Date(2025, 1, 6, 9, 0, 0, 0, time.UTC)

// Fixtures returns n deterministic fixtures with card IDs FirstCardID,
// FirstCardID+1, … The card at index i (ID 100+i) has i%5 comments and
// i%4 subtasks, so card 100 has neither, and its title is titles[i%10],
// starting "Set up CI pipeline", "Fix login redirect loop", "Migrate
// invoices to the new schema". Cards at even indexes write times with "Z",
// those at odd indexes with "+00:00". Cards at indexes 3, 8, 13, … carry
// unknown extra fields. The subtask counts of each card match its
// subtasks. Fixtures returns an empty, non-nil slice for n <= 0, so that
// Config{Cards: Fixtures(0)} serves no cards.
func Fixtures(n int) []CardFixture {
	out := make([]CardFixture, 0, max(n, 0))
	for i := range max(n, 0) {
		out = append(out, fixture(i))
	}
	return out
}

// fixture makes the fixture at index i. The moduli below only vary the
// fields from card to card; none of them means anything.
func fixture(i int) CardFixture {
	id := FirstCardID + i
	created := fixtureEpoch.Add(time.Duration(i) * 26 * time.Hour)
	stamp := func(t time.Time) string { return rfc3339(t, i%2 == 1) }
	title := titles[i%len(titles)]
	if i >= len(titles) {
		title = fmt.Sprintf("%s #%d", title, i/len(titles)+1)
	}
	board := 1 + i%3
	section := 1 + i%4

	c := Card{
		CardID:       id,
		BoardID:      board,
		WorkflowID:   10*board + 1,
		Title:        title,
		Description:  fmt.Sprintf("<p>%s.</p><p>Notes &amp; links for card %d.</p>", title, id),
		Color:        colors[i%len(colors)],
		Section:      section,
		ColumnID:     10*board + section,
		LaneID:       100*board + 1 + i%2,
		Position:     i % 7,
		Reporter:     user(1 + (i+2)%5),
		CreatedAt:    stamp(created),
		LastModified: stamp(created.Add(time.Duration(i%4+1) * 24 * time.Hour)),
		TagIDs:       []int{},
		CoOwnerIDs:   []int{},
		WatchersIDs:  []int{},
		CustomFields: []CustomField{},
		LinkedCards:  []LinkedCard{},
	}
	if i%2 == 0 {
		c.CustomID = ptr(fmt.Sprintf("ENG-%d", id))
	}
	if i%7 != 6 {
		c.OwnerUserID = ptr(1 + i%5)
	}
	if i%4 != 3 {
		c.TypeID = ptr(1 + i%3)
	}
	if i%5 != 4 {
		c.Size = ptr(1 + i%8)
	}
	if i%3 != 2 {
		c.Priority = ptr(1 + i%4)
	}
	if i%3 == 0 {
		c.Deadline = ptr(stamp(created.Add(21 * 24 * time.Hour)))
	}
	if i%6 == 5 {
		c.IsBlocked = 1
		c.BlockReason = &BlockReason{ReasonID: 1 + i%3, Comment: "Waiting on the vendor's API keys."}
	}
	if i%3 != 0 {
		c.TagIDs = []int{1 + i%4, 5 + i%3}
	}
	if i%4 == 1 {
		c.CoOwnerIDs = []int{2, 3}
	}
	if i%7 != 0 {
		c.WatchersIDs = []int{1 + i%5}
	}
	if i%2 == 0 {
		c.CustomFields = []CustomField{{FieldID: 1, Value: "team-" + teams[i%len(teams)]}}
	}
	if i%4 == 2 {
		c.LinkedCards = []LinkedCard{{CardID: id - 1, LinkType: "child"}}
	}
	if i%5 == 3 {
		c.Extra = map[string]any{"version": 3}
		if i%10 == 8 {
			c.Extra["revision_note"] = "imported"
		}
	}

	fx := CardFixture{Card: c, Comments: []Comment{}, Subtasks: []Subtask{}}
	for k := range i % 5 {
		fx.Comments = append(fx.Comments, comment(i, k, created, stamp))
	}
	for k := range i % 4 {
		st := subtask(i, k, created, stamp)
		if st.FinishedAt != nil {
			fx.Card.FinishedSubtaskCount++
		} else {
			fx.Card.UnfinishedSubtaskCount++
		}
		fx.Subtasks = append(fx.Subtasks, st)
	}
	return fx
}

// comment makes comment k of the card at index i.
func comment(i, k int, created time.Time, stamp func(time.Time) string) Comment {
	id := FirstCardID + i
	at := created.Add(time.Duration(k+1) * 3 * time.Hour)
	c := Comment{
		CommentID:   10*id + k,
		Type:        "plain",
		Text:        fmt.Sprintf("<p>Update %d on <b>card %d</b>.</p>", k+1, id),
		Attachments: []Attachment{},
		CreatedAt:   stamp(at),
		Author:      user(1 + (i+k)%5),
	}
	if k%2 == 1 {
		c.LastModified = ptr(stamp(at.Add(time.Hour)))
	}
	if k == 1 {
		c.Attachments = []Attachment{attachment(10*id+k, fmt.Sprintf("screenshot-%d.png", id))}
	}
	return c
}

// subtask makes subtask k of the card at index i.
func subtask(i, k int, created time.Time, stamp func(time.Time) string) Subtask {
	id := FirstCardID + i
	s := Subtask{
		SubtaskID:   10*id + 5 + k,
		Description: fmt.Sprintf("Step %d of card %d", k+1, id),
		Position:    k,
		Attachments: []Attachment{},
	}
	if k != 2 {
		s.OwnerUserID = ptr(1 + (i+k)%5)
	}
	if (i+k)%3 == 0 {
		s.FinishedAt = ptr(stamp(created.Add(time.Duration(k+1) * 24 * time.Hour)))
	}
	if k == 0 {
		s.Deadline = ptr(stamp(created.Add(14 * 24 * time.Hour)))
	}
	if (i+k)%5 == 4 {
		s.Attachments = []Attachment{attachment(10*id+5+k, fmt.Sprintf("checklist-%d.pdf", id))}
	}
	return s
}

var (
	colors = [...]string{"34a97b", "f37325", "2666be", "e2c12f", "9b59b6", "7f8c8d"}
	teams  = [...]string{"platform", "billing", "growth"}
)

func attachment(id int, name string) Attachment {
	return Attachment{ID: id, FileName: name, Link: "https://files.kanbanize.test/" + name}
}

func user(id int) UserRef { return UserRef{Type: "user", Value: id} }

func ptr[T any](v T) *T { return &v }

// rfc3339 formats t in UTC, with "+00:00" instead of "Z" when plus is set:
// the real API uses both, and clients must read both.
func rfc3339(t time.Time, plus bool) string {
	if plus {
		return t.UTC().Format("2006-01-02T15:04:05+00:00")
	}
	return t.UTC().Format(time.RFC3339)
}
