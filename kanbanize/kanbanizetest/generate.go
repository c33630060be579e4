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
// FirstCardID+1, …: their comments, subtasks, titles, time zones, watcher
// field names, extra fields and links vary by index (see "Fixtures" in the
// package doc). It returns an empty, non-nil slice for n <= 0.
func Fixtures(n int) []CardFixture {
	out := make([]CardFixture, 0, max(n, 0))
	for i := range max(n, 0) {
		out = append(out, fixture(i))
	}
	// Each child link has its parent link on the other side.
	for i := range out {
		for _, l := range out[i].Card.LinkedCards {
			if j := l.CardID - FirstCardID; l.LinkType == "child" && j >= 0 && j < len(out) {
				out[j].Card.LinkedCards = append(out[j].Card.LinkedCards, LinkedCard{CardID: out[i].Card.CardID, LinkType: "parent"})
			}
		}
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
		CardID:         id,
		BoardID:        board,
		WorkflowID:     10*board + 1,
		Title:          title,
		Description:    fmt.Sprintf("<p>%s.</p><p>Notes &amp; links for card %d.</p>", title, id),
		Color:          colors[i%len(colors)],
		Section:        section,
		ColumnID:       10*board + section,
		LaneID:         100*board + 1 + i%2,
		Position:       i % 7,
		Reporter:       UserRef{Type: "user", UserID: 1 + (i+2)%5},
		CreatedAt:      stamp(created),
		LastModified:   stamp(created.Add(time.Duration(section) * 24 * time.Hour)),
		Revision:       section + 1 + i%3,
		TagIDs:         []int{},
		MilestoneIDs:   []int{},
		CoOwnerIDs:     []int{},
		WatcherIDs:     []int{},
		CustomFields:   []CustomField{},
		Stickers:       []Sticker{},
		Annotations:    []Annotation{},
		Attachments:    []Attachment{},
		LinkedCards:    []LinkedCard{},
		OldWatchersKey: i%3 == 1,
	}
	timeline(&c, created, stamp)
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
		c.WatcherIDs = []int{1 + i%5}
	}
	if i%5 == 2 {
		c.MilestoneIDs = []int{1 + i%3}
	}
	if i%9 == 4 {
		c.Stickers = []Sticker{{ID: 10 * id, CardID: id, StickerID: 1 + i%3}}
	}
	if i%10 == 7 {
		c.Annotations = []Annotation{{ThreadID: fmt.Sprintf("thread-%d", id), CommentID: fmt.Sprintf("note-%d", id),
			AuthorID: 1 + i%5, Content: "Is this step still needed?", CreatedAt: stamp(created.Add(time.Hour))}}
	}
	switch i % 6 {
	case 1:
		c.Attachments = []Attachment{cardAttachment(10*id+8, fmt.Sprintf("spec-%d.pdf", id))}
	case 4:
		a := cardAttachment(10*id+9, fmt.Sprintf("screen-%d.png", id))
		c.Attachments = []Attachment{a}
		c.CoverImage = &CoverImage{AttachmentID: a.ID, Link: a.Link, Width: 1280, Height: 720}
	}
	if i%2 == 0 {
		c.CustomFields = []CustomField{{FieldID: 1, Value: "team-" + teams[i%len(teams)]}}
	}
	if i%4 == 2 {
		c.LinkedCards = []LinkedCard{{CardID: id - 1, LinkType: "child"}}
		c.ChildCardStats = childStats(fixture(i - 1).Card) // i-1 has no child: no deeper recursion
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
	fx.Card.Subtasks = cloneSubtasks(fx.Subtasks)
	return fx
}

// timeline sets the times at which c, created at created, entered each
// section it reached, and since when it is where it is: the later the
// section, the more of them. Each comes before c's last modification.
func timeline(c *Card, created time.Time, stamp func(time.Time) string) {
	since := created
	if c.Section >= 2 {
		since = created.Add(2 * time.Hour)
		c.FirstRequestTime, c.LastRequestTime = ptr(stamp(since)), ptr(stamp(since))
		c.LastColumnID, c.LastLaneID = ptr(c.ColumnID-1), ptr(c.LaneID)
	}
	if c.Section >= 3 {
		first := created.Add(24 * time.Hour)
		since = created.Add(30 * time.Hour)
		c.FirstStartTime, c.LastStartTime = ptr(stamp(first)), ptr(stamp(since))
	}
	if c.Section >= 4 {
		since = created.Add(4*24*time.Hour - time.Hour)
		c.FirstEndTime, c.LastEndTime = ptr(stamp(since)), ptr(stamp(since))
	}
	c.InCurrentPositionSince = stamp(since)
}

// childStats sums up child, a card with no children of its own.
func childStats(child Card) ChildCardStats {
	size := 0
	if child.Size != nil {
		size = *child.Size
	}
	st := ChildCardStats{ChildCardSizeSum: size}
	if child.Section >= 4 {
		st.FinishedBottomChildCardSizeSum = size
	} else {
		st.UnfinishedBottomChildCardSizeSum = size
		st.HasUnfinishedChildCards = true
		st.LastUnfinishedChildCardDeadline = child.Deadline
	}
	return st
}

// comment makes comment k of the card at index i.
func comment(i, k int, created time.Time, stamp func(time.Time) string) Comment {
	id := FirstCardID + i
	at := created.Add(time.Duration(k+1) * 3 * time.Hour)
	c := Comment{
		CommentID:   10*id + k,
		Type:        CommentPlain,
		Text:        fmt.Sprintf("<p>Update %d on <b>card %d</b>.</p>", k+1, id),
		Attachments: []Attachment{},
		CreatedAt:   stamp(at),
		Author:      ptr(internal(1 + (i+k)%5)),
	}
	vendor := external(fmt.Sprintf("vendor-%d@example.com", id))
	switch k {
	case 2:
		c.Type, c.Author = CommentSentAsEmail, nil
		c.Text = fmt.Sprintf("<p>Could you confirm the date for card %d?</p>", id)
		c.Sender = ptr(internal(1 + (i+k)%5))
		c.Recipients = &Recipients{To: []UserRef{vendor}, CC: []UserRef{internal(1 + i%5)}, BCC: []UserRef{external("audit@example.com")}}
	case 3:
		c.Type, c.Author = CommentReceivedAsEmail, nil
		c.Text = fmt.Sprintf("<p>Confirmed for card %d.</p>", id)
		c.Sender = ptr(vendor)
		c.Recipients = &Recipients{To: []UserRef{internal(1 + (i+k)%5)}, CC: []UserRef{}, BCC: []UserRef{}}
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

// cardAttachment is a card's first attachment, which is numbered.
func cardAttachment(id int, name string) Attachment {
	a := attachment(id, name)
	a.Position = ptr(0)
	return a
}

func internal(userID int) UserRef { return UserRef{Type: PersonInternal, UserID: userID} }

func external(email string) UserRef { return UserRef{Type: PersonExternal, Email: email} }

func ptr[T any](v T) *T { return &v }

// rfc3339 formats t in UTC, with "+00:00" instead of "Z" when plus is set:
// the real API uses both, and clients must read both.
func rfc3339(t time.Time, plus bool) string {
	if plus {
		return t.UTC().Format("2006-01-02T15:04:05+00:00")
	}
	return t.UTC().Format(time.RFC3339)
}
