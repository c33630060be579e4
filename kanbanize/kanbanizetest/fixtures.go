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
	CardID                 int           `json:"card_id"`
	CustomID               *string       `json:"custom_id"`
	BoardID                int           `json:"board_id"`
	WorkflowID             int           `json:"workflow_id"`
	Title                  string        `json:"title"`
	Description            string        `json:"description"` // HTML
	OwnerUserID            *int          `json:"owner_user_id"`
	TypeID                 *int          `json:"type_id"`
	Color                  string        `json:"color"` // hex without '#', like "34a97b"
	Section                int           `json:"section"`
	ColumnID               int           `json:"column_id"`
	LaneID                 int           `json:"lane_id"`
	Position               int           `json:"position"`
	Size                   *int          `json:"size"`
	Priority               *int          `json:"priority"`
	Deadline               *string       `json:"deadline"`
	Reporter               UserRef       `json:"reporter"`
	CreatedAt              string        `json:"created_at"`
	LastModified           string        `json:"last_modified"`
	IsBlocked              int           `json:"is_blocked"` // 0 or 1, as the real API sends it
	BlockReason            *BlockReason  `json:"block_reason"`
	TagIDs                 []int         `json:"tag_ids"`
	CoOwnerIDs             []int         `json:"co_owner_ids"`
	WatchersIDs            []int         `json:"watchers_ids"`
	CustomFields           []CustomField `json:"custom_fields"`
	LinkedCards            []LinkedCard  `json:"linked_cards"`
	FinishedSubtaskCount   int           `json:"finished_subtask_count"`
	UnfinishedSubtaskCount int           `json:"unfinished_subtask_count"`

	// Extra holds fields a client is not expected to know, such as
	// "version", merged into the JSON object so that tests can check they
	// are ignored. Its keys must differ from the fields above. Extra is
	// written by MarshalJSON but not read back by json.Unmarshal.
	Extra map[string]any `json:"-"`
}

// MarshalJSON encodes c as the API does, with c.Extra merged in.
func (c Card) MarshalJSON() ([]byte, error) {
	type plain Card // same fields, without this method
	b, err := json.Marshal(plain(c))
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

// UserRef points at a user, as in "reporter" and "author":
// {"type":"user","value":7}.
type UserRef struct {
	Type  string `json:"type"`
	Value int    `json:"value"`
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

// LinkedCard is a link from a card to another, such as a child.
type LinkedCard struct {
	CardID   int    `json:"card_id"`
	LinkType string `json:"link_type"`
}

// Attachment is a file attached to a comment or a subtask.
type Attachment struct {
	ID       int    `json:"id"`
	FileName string `json:"file_name"`
	Link     string `json:"link"`
}

// Comment is one element of GET /api/v2/cards/{card_id}/comments.
type Comment struct {
	CommentID    int          `json:"comment_id"`
	Type         string       `json:"type"` // "plain"
	Text         string       `json:"text"` // HTML
	Attachments  []Attachment `json:"attachments"`
	CreatedAt    string       `json:"created_at"`
	LastModified *string      `json:"last_modified"`
	Author       UserRef      `json:"author"`
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
}

// clone returns a copy of fx that shares no slice or map with it, with
// nil slices made empty so that they encode as [] rather than null.
// Pointed-to values are shared: fixtures treat them as immutable.
func (fx CardFixture) clone() CardFixture {
	c := fx.Card
	c.TagIDs = cloneSlice(c.TagIDs)
	c.CoOwnerIDs = cloneSlice(c.CoOwnerIDs)
	c.WatchersIDs = cloneSlice(c.WatchersIDs)
	c.CustomFields = cloneSlice(c.CustomFields)
	c.LinkedCards = cloneSlice(c.LinkedCards)
	c.Extra = maps.Clone(c.Extra)
	out := CardFixture{Card: c, Comments: cloneSlice(fx.Comments), Subtasks: cloneSlice(fx.Subtasks)}
	for i := range out.Comments {
		out.Comments[i].Attachments = cloneSlice(out.Comments[i].Attachments)
	}
	for i := range out.Subtasks {
		out.Subtasks[i].Attachments = cloneSlice(out.Subtasks[i].Attachments)
	}
	return out
}

// cloneSlice copies s, returning an empty, non-nil slice for nil.
func cloneSlice[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
