package kanbanizetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Card is a card as GET /api/v2/cards/{card_id} returns it. Pointer fields
// are null in JSON when nil. Times are RFC 3339 strings kept as text, so a
// fixture can choose between a "Z" and a "+00:00" offset.
type Card struct {
	CardID       int     `json:"card_id"`
	CustomID     *string `json:"custom_id"`
	BoardID      int     `json:"board_id"`
	WorkflowID   int     `json:"workflow_id"`
	Title        string  `json:"title"`
	Description  string  `json:"description"` // HTML
	OwnerUserID  *int    `json:"owner_user_id"`
	TypeID       *int    `json:"type_id"`
	Color        string  `json:"color"` // hex without '#', like "34a97b"
	Section      int     `json:"section"`
	ColumnID     int     `json:"column_id"`
	LaneID       int     `json:"lane_id"`
	Position     int     `json:"position"`
	LastColumnID *int    `json:"last_column_id"` // before the card's last move
	LastLaneID   *int    `json:"last_lane_id"`
	Size         *int    `json:"size"`
	Priority     *int    `json:"priority"`
	Deadline     *string `json:"deadline"`
	Reporter     UserRef `json:"reporter"`
	CreatedAt    string  `json:"created_at"`
	LastModified string  `json:"last_modified"`
	Revision     int     `json:"revision"`

	// The timeline: since when the card is where it is, and when it first
	// and last entered the requested, in-progress and done sections; nil
	// until it did.
	InCurrentPositionSince string  `json:"in_current_position_since"`
	FirstRequestTime       *string `json:"first_request_time"`
	FirstStartTime         *string `json:"first_start_time"`
	FirstEndTime           *string `json:"first_end_time"`
	LastRequestTime        *string `json:"last_request_time"`
	LastStartTime          *string `json:"last_start_time"`
	LastEndTime            *string `json:"last_end_time"`

	IsBlocked   int          `json:"is_blocked"` // 0 or 1, as the real API sends it
	BlockReason *BlockReason `json:"block_reason"`
	TagIDs      []int        `json:"tag_ids"`
	// MilestoneIDs are the milestones the card counts towards.
	MilestoneIDs []int `json:"milestone_ids"`
	CoOwnerIDs   []int `json:"co_owner_ids"`
	// WatcherIDs are sent as "watcher_ids", as live answers name them, or
	// as "watchers_ids", the OpenAPI document's spelling of 2023, when
	// OldWatchersKey is set.
	WatcherIDs     []int          `json:"watcher_ids"`
	CustomFields   []CustomField  `json:"custom_fields"`
	Stickers       []Sticker      `json:"stickers"`
	Annotations    []Annotation   `json:"annotations"`
	Attachments    []Attachment   `json:"attachments"`
	CoverImage     *CoverImage    `json:"cover_image"`
	LinkedCards    []LinkedCard   `json:"linked_cards"`
	ChildCardStats ChildCardStats `json:"child_card_stats"`
	// Subtasks are the subtasks the card embeds: those of its fixture,
	// as Fixtures makes them.
	Subtasks               []Subtask `json:"subtasks"`
	FinishedSubtaskCount   int       `json:"finished_subtask_count"`
	UnfinishedSubtaskCount int       `json:"unfinished_subtask_count"`

	// OldWatchersKey writes WatcherIDs as "watchers_ids".
	OldWatchersKey bool `json:"-"`

	// Extra holds fields a client is not expected to know, such as
	// "version", merged into the JSON object so that tests can check they
	// are ignored. Its keys must differ from the fields above. Extra is
	// written by MarshalJSON but not read back by json.Unmarshal.
	Extra map[string]any `json:"-"`
}

// MarshalJSON encodes c as the API does, with c.Extra merged in.
func (c Card) MarshalJSON() ([]byte, error) {
	type plain Card // same fields, without this method
	var v any = plain(c)
	if c.OldWatchersKey {
		v = struct {
			plain
			Hidden []int `json:"watcher_ids,omitempty"` // hides plain's, being shallower
			Old    []int `json:"watchers_ids"`
		}{plain: plain(c), Old: c.WatcherIDs}
	}
	b, err := json.Marshal(v)
	if err != nil || len(c.Extra) == 0 {
		return b, err
	}
	var known map[string]json.RawMessage
	if err := json.Unmarshal(b, &known); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(c.Extra)) {
		if _, dup := known[k]; dup {
			return nil, fmt.Errorf("kanbanizetest: Card.Extra[%q] repeats a standard card field; remove it from Extra", k)
		}
	}
	extra, err := json.Marshal(c.Extra)
	if err != nil {
		return nil, fmt.Errorf("kanbanizetest: Card.Extra: %w", err)
	}
	// Splice the two objects: drop b's closing brace and extra's opening one.
	var out bytes.Buffer
	out.Write(b[:len(b)-1])
	out.WriteByte(',')
	out.Write(extra[1:])
	return out.Bytes(), nil
}

// UnmarshalJSON decodes a card as MarshalJSON encodes it, setting
// OldWatchersKey when the watchers come as "watchers_ids". Extra is left
// empty.
func (c *Card) UnmarshalJSON(b []byte) error {
	type plain Card
	v := struct {
		plain
		Old []int `json:"watchers_ids"`
	}{plain: plain(*c)}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*c = Card(v.plain)
	if v.Old != nil {
		c.WatcherIDs, c.OldWatchersKey = v.Old, true
	}
	return nil
}

// The types of people and comments the fake serves.
const (
	// PersonInternal is a user of the account, given by user ID.
	PersonInternal = "internal"
	// PersonExternal is anyone else, given by email address.
	PersonExternal = "external"
	// CommentPlain is a comment written on the board, with an author.
	CommentPlain = "plain"
	// CommentSentAsEmail is a comment sent from the card as email, with a
	// sender and recipients instead of an author.
	CommentSentAsEmail = "sent as email"
	// CommentReceivedAsEmail is an email received on the card's address,
	// with a sender and recipients instead of an author.
	CommentReceivedAsEmail = "received as email"
)

// UserRef points at a person, as a comment's author, sender and
// recipients do: {"type":"internal","value":7} for a user of the account,
// {"type":"external","value":"someone@example.com"} for anyone else. The
// value is Email when set, UserID otherwise. A card's reporter is
// {"type":"user","value":7}.
type UserRef struct {
	Type   string
	UserID int
	Email  string
}

// MarshalJSON writes {"type":…,"value":…}.
func (u UserRef) MarshalJSON() ([]byte, error) {
	var value any = u.UserID
	if u.Email != "" {
		value = u.Email
	}
	return json.Marshal(struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}{u.Type, value})
}

// UnmarshalJSON reads what MarshalJSON writes: a numeric value is a
// UserID, a string an Email.
func (u *UserRef) UnmarshalJSON(b []byte) error {
	var v struct {
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*u = UserRef{Type: v.Type}
	if json.Unmarshal(v.Value, &u.Email) == nil {
		return nil
	}
	return json.Unmarshal(v.Value, &u.UserID)
}

// Recipients are who an email comment went to.
type Recipients struct {
	To  []UserRef `json:"to"`
	CC  []UserRef `json:"cc"`
	BCC []UserRef `json:"bcc"`
}

// BlockReason says why a card is blocked.
type BlockReason struct {
	ReasonID int    `json:"reason_id"`
	Comment  string `json:"comment"`
}

// CustomField is the value of one custom field of a card.
type CustomField struct {
	FieldID int    `json:"field_id"`
	Value   string `json:"value"`
}

// LinkedCard is a link from a card to another: LinkType is what the
// other card is to this one, such as "child" or "parent".
type LinkedCard struct {
	CardID   int    `json:"card_id"`
	LinkType string `json:"link_type"`
}

// ChildCardStats sums up a card's child cards.
type ChildCardStats struct {
	ChildCardSizeSum                 int     `json:"child_card_size_sum"`
	FinishedBottomChildCardSizeSum   int     `json:"finished_bottom_child_card_size_sum"`
	UnfinishedBottomChildCardSizeSum int     `json:"unfinished_bottom_child_card_size_sum"`
	HasUnfinishedChildCards          bool    `json:"has_unfinished_child_cards"`
	LastUnfinishedChildCardDeadline  *string `json:"last_unfinished_child_card_deadline"`
}

// Attachment is a file attached to a card, a comment or a subtask. A
// card's attachments have a Position; others have none.
type Attachment struct {
	ID       int    `json:"id"`
	FileName string `json:"file_name"`
	Link     string `json:"link"`
	Position *int   `json:"position,omitempty"`
}

// CoverImage is the attachment a card shows as its cover.
type CoverImage struct {
	AttachmentID int    `json:"attachment_id"`
	Link         string `json:"link"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
}

// Sticker is a sticker put on a card.
type Sticker struct {
	ID        int `json:"id"`
	CardID    int `json:"card_id"`
	StickerID int `json:"sticker_id"`
}

// Annotation is a note on a part of a card's description.
type Annotation struct {
	ThreadID  string `json:"thread_id"`
	CommentID string `json:"comment_id"`
	AuthorID  int    `json:"author_id"`
	Content   string `json:"content"`
	CreatedAt string `json:"created_at"`
}

// Comment is one element of GET /api/v2/cards/{card_id}/comments: of
// Type CommentPlain with an Author, or CommentSentAsEmail or
// CommentReceivedAsEmail with a Sender and Recipients instead.
type Comment struct {
	CommentID    int          `json:"comment_id"`
	Type         string       `json:"type"`
	Text         string       `json:"text"` // HTML
	Attachments  []Attachment `json:"attachments"`
	CreatedAt    string       `json:"created_at"`
	LastModified *string      `json:"last_modified"`
	Author       *UserRef     `json:"author,omitempty"`
	Sender       *UserRef     `json:"sender,omitempty"`
	Recipients   *Recipients  `json:"recipients,omitempty"`
}

// Subtask is one element of GET /api/v2/cards/{card_id}/subtasks. A nil
// FinishedAt means the subtask is not finished.
type Subtask struct {
	SubtaskID   int          `json:"subtask_id"`
	Description string       `json:"description"`
	OwnerUserID *int         `json:"owner_user_id"`
	FinishedAt  *string      `json:"finished_at"`
	Deadline    *string      `json:"deadline"`
	Position    int          `json:"position"`
	Attachments []Attachment `json:"attachments"`
}

// CardFixture bundles a card with its comments and subtasks.
type CardFixture struct {
	Card     Card
	Comments []Comment
	Subtasks []Subtask
	// Forbidden makes each endpoint of the card answer 403, as the API
	// does when the key's user may not see the card's board: error code
	// FB01, the fake's own, with details naming the card and its board.
	Forbidden bool
}

// clone returns a copy of fx that shares no slice or map with it, with
// nil slices made empty so that they encode as [] rather than null.
// Pointed-to values are shared: fixtures treat them as immutable.
func (fx CardFixture) clone() CardFixture {
	c := fx.Card
	c.TagIDs = cloneSlice(c.TagIDs)
	c.CoOwnerIDs = cloneSlice(c.CoOwnerIDs)
	c.MilestoneIDs = cloneSlice(c.MilestoneIDs)
	c.WatcherIDs = cloneSlice(c.WatcherIDs)
	c.CustomFields = cloneSlice(c.CustomFields)
	c.Stickers = cloneSlice(c.Stickers)
	c.Annotations = cloneSlice(c.Annotations)
	c.Attachments = cloneSlice(c.Attachments)
	c.LinkedCards = cloneSlice(c.LinkedCards)
	c.Subtasks = cloneSubtasks(c.Subtasks)
	c.Extra = maps.Clone(c.Extra)
	out := CardFixture{Card: c, Comments: cloneSlice(fx.Comments), Subtasks: cloneSubtasks(fx.Subtasks), Forbidden: fx.Forbidden}
	for i := range out.Comments {
		out.Comments[i].Attachments = cloneSlice(out.Comments[i].Attachments)
	}
	return out
}

// cloneSubtasks copies subtasks and their attachments.
func cloneSubtasks(subtasks []Subtask) []Subtask {
	out := cloneSlice(subtasks)
	for i := range out {
		out[i].Attachments = cloneSlice(out[i].Attachments)
	}
	return out
}

// cloneSlice copies s, returning an empty, non-nil slice for nil.
func cloneSlice[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
