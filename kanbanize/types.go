package kanbanize

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Card is a Kanbanize card as API v2 returns it (GET /cards/{card_id}).
// Fields the API may send as null are pointers, zero-able types or raw
// JSON; fields it adds later are ignored; custom fields and the block reason
// are kept as sent. Watchers are read from "watcher_ids" and "watchers_ids"
// alike, and written as "watcher_ids".
type Card struct {
	CardID       ID      `json:"card_id"`
	CustomID     Text    `json:"custom_id"`
	BoardID      ID      `json:"board_id"`
	WorkflowID   ID      `json:"workflow_id"`
	Title        string  `json:"title"`
	Description  string  `json:"description"` // HTML
	OwnerUserID  *ID     `json:"owner_user_id"`
	TypeID       *ID     `json:"type_id"`
	Color        string  `json:"color"`
	Section      Int     `json:"section"`
	ColumnID     ID      `json:"column_id"`
	LaneID       ID      `json:"lane_id"`
	Position     Int     `json:"position"`
	LastColumnID *ID     `json:"last_column_id"` // where it was before its last move
	LastLaneID   *ID     `json:"last_lane_id"`
	Size         *Float  `json:"size"`
	Priority     *Int    `json:"priority"`
	Deadline     Time    `json:"deadline"`
	Reporter     *Author `json:"reporter"`
	CreatedAt    Time    `json:"created_at"`
	LastModified Time    `json:"last_modified"`
	// Revision counts the card's changes.
	Revision Int `json:"revision"`

	// The timeline: since when the card is in its column and lane, and
	// when it first and last entered the requested, in-progress and done
	// sections of its workflow. Each is zero (null) until it happened.
	InCurrentPositionSince Time `json:"in_current_position_since"`
	FirstRequestTime       Time `json:"first_request_time"`
	FirstStartTime         Time `json:"first_start_time"`
	FirstEndTime           Time `json:"first_end_time"`
	LastRequestTime        Time `json:"last_request_time"`
	LastStartTime          Time `json:"last_start_time"`
	LastEndTime            Time `json:"last_end_time"`

	IsBlocked    Flag            `json:"is_blocked"`
	BlockReason  json.RawMessage `json:"block_reason,omitempty"`
	TagIDs       []ID            `json:"tag_ids"`
	MilestoneIDs []ID            `json:"milestone_ids"`
	CoOwnerIDs   []ID            `json:"co_owner_ids"`
	// WatcherIDs are the users who watch the card, from "watcher_ids" or
	// "watchers_ids".
	WatcherIDs   []ID            `json:"watcher_ids"`
	CustomFields json.RawMessage `json:"custom_fields,omitempty"`
	Stickers     []Sticker       `json:"stickers"`
	Annotations  []Annotation    `json:"annotations"`
	Attachments  []Attachment    `json:"attachments"`
	CoverImage   *CoverImage     `json:"cover_image"`

	// LinkedCards are the card's relations: parents, children,
	// predecessors, successors, relatives.
	LinkedCards []LinkedCard `json:"linked_cards"`
	// ChildCardStats sums up the card's children; nil when not sent.
	ChildCardStats *ChildCardStats `json:"child_card_stats"`
	// Subtasks are the subtasks the card embeds, as GET
	// /cards/{card_id}/subtasks lists them.
	Subtasks               []Subtask `json:"subtasks"`
	FinishedSubtaskCount   Int       `json:"finished_subtask_count"`
	UnfinishedSubtaskCount Int       `json:"unfinished_subtask_count"`
}

// UnmarshalJSON decodes a card, merging "watchers_ids" into WatcherIDs.
func (c *Card) UnmarshalJSON(b []byte) error {
	type plain Card // the same fields, without this method
	v := struct {
		plain
		OldWatcherIDs []ID `json:"watchers_ids"`
	}{plain: plain(*c)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Card(v.plain)
	c.WatcherIDs = mergeIDs(c.WatcherIDs, v.OldWatcherIDs)
	return nil
}

// mergeIDs returns a followed by the IDs of b it lacks; nil when both are.
func mergeIDs(a, b []ID) []ID {
	if b == nil {
		return a
	}
	if a == nil {
		return b
	}
	for _, id := range b {
		if !slices.Contains(a, id) {
			a = append(a, id)
		}
	}
	return a
}

// LinkedCard is a card related to another: card_id is the linked card and
// link_type says what it is to the card holding the link, such as
// "parent", "child", "predecessor", "successor" or "relative". Position,
// sent by some endpoints, orders the links of one type.
type LinkedCard struct {
	CardID   ID     `json:"card_id"`
	LinkType string `json:"link_type"`
	Position *Int   `json:"position,omitempty"`
}

// ChildCardStats sums up a card's child cards: the sizes of all of them,
// and of the finished and unfinished ones at the bottom of the hierarchy,
// whether any is unfinished, and the latest deadline among those.
type ChildCardStats struct {
	ChildCardSizeSum                 Float `json:"child_card_size_sum"`
	FinishedBottomChildCardSizeSum   Float `json:"finished_bottom_child_card_size_sum"`
	UnfinishedBottomChildCardSizeSum Float `json:"unfinished_bottom_child_card_size_sum"`
	HasUnfinishedChildCards          Flag  `json:"has_unfinished_child_cards"`
	LastUnfinishedChildCardDeadline  Time  `json:"last_unfinished_child_card_deadline"`
}

// Attachment is a file attached to a card, a comment or a subtask: a link
// and the file's name. Position orders a card's attachments; comments'
// are not numbered.
type Attachment struct {
	ID       ID     `json:"id"`
	FileName string `json:"file_name"`
	Link     string `json:"link"`
	Position *Int   `json:"position,omitempty"`
}

// CoverImage is the attachment a card shows as its cover.
type CoverImage struct {
	AttachmentID ID     `json:"attachment_id"`
	Link         string `json:"link"`
	Width        Int    `json:"width"`
	Height       Int    `json:"height"`
}

// Sticker is a sticker put on a card: ID numbers this placement,
// StickerID names the sticker.
type Sticker struct {
	ID        ID `json:"id"`
	CardID    ID `json:"card_id"`
	StickerID ID `json:"sticker_id"`
}

// Annotation is a note on a part of a card's description, in a thread.
type Annotation struct {
	ThreadID  Text   `json:"thread_id"`
	CommentID Text   `json:"comment_id"`
	AuthorID  ID     `json:"author_id"`
	Content   string `json:"content"`
	CreatedAt Time   `json:"created_at"`
}

// Comment is a comment on a card. A comment written on the board has an
// Author; one sent or received as email has a Sender and Recipients
// instead. The fake API's types are "plain", "sent as email" and
// "received as email"; IsEmail does not depend on them.
type Comment struct {
	CommentID    ID           `json:"comment_id"`
	Type         string       `json:"type"`
	Text         string       `json:"text"` // HTML
	Attachments  []Attachment `json:"attachments"`
	CreatedAt    Time         `json:"created_at"`
	LastModified Time         `json:"last_modified"`
	Author       *Author      `json:"author"`
	Sender       *Author      `json:"sender,omitempty"`
	Recipients   *Recipients  `json:"recipients,omitempty"`
}

// IsEmail reports whether the comment was sent or received as email: it
// has a sender or recipients.
func (c Comment) IsEmail() bool { return c.Sender != nil || c.Recipients != nil }

// Recipients are who an email comment went to. A bare list, which some
// answers may send, reads as To.
type Recipients struct {
	To  []Author `json:"to"`
	CC  []Author `json:"cc"`
	BCC []Author `json:"bcc"`
}

// UnmarshalJSON reads {"to":[…],"cc":[…],"bcc":[…]}, or a list as To.
func (r *Recipients) UnmarshalJSON(b []byte) error {
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '[' {
		*r = Recipients{}
		return json.Unmarshal(b, &r.To)
	}
	type plain Recipients
	return json.Unmarshal(b, (*plain)(r))
}

// Subtask is a subtask of a card.
type Subtask struct {
	SubtaskID   ID           `json:"subtask_id"`
	Description string       `json:"description"`
	OwnerUserID *ID          `json:"owner_user_id"`
	FinishedAt  Time         `json:"finished_at"` // zero while not finished
	Deadline    Time         `json:"deadline"`
	Position    Int          `json:"position"`
	Attachments []Attachment `json:"attachments"`
}

// Finished reports whether the subtask is done.
func (s Subtask) Finished() bool { return !s.FinishedAt.IsZero() }

// Author is a person as the API refers to one, in a comment's author,
// sender and recipients and a card's reporter: a type and a value whose
// form depends on it. In comments the types are "internal", a user of the
// account whose value is the user ID, and "external", anyone else, whose
// value is an email address; a reporter may be of another type, such as
// "user". Value is kept as sent. A bare string or number reads as Value
// with no Type, and an object with neither member as Value whole, so that
// no answer loses the person.
type Author struct {
	Type  string          `json:"type,omitempty"`
	Value json.RawMessage `json:"value"`
}

// UnmarshalJSON reads {"type":…,"value":…}, or the other forms above.
func (a *Author) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 || b[0] != '{' { // json.Unmarshal has checked that b is JSON
		*a = Author{Value: bytes.Clone(b)}
		return nil
	}
	var v struct {
		Type  *Text           `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Type == nil && v.Value == nil {
		*a = Author{Value: bytes.Clone(b)}
		return nil
	}
	*a = Author{Value: v.Value}
	if v.Type != nil {
		a.Type = string(*v.Type)
	}
	return nil
}

// CardDetails is a card with its comments and subtasks.
type CardDetails struct {
	Card     Card      `json:"card"`
	Comments []Comment `json:"comments"`
	Subtasks []Subtask `json:"subtasks"`
}
