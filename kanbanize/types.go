package kanbanize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Card is a Kanbanize card as API v2 returns it. Fields the API may send
// as null are pointers or raw JSON; fields it adds later are ignored.
type Card struct {
	CardID                 ID              `json:"card_id"`
	CustomID               *string         `json:"custom_id"`
	BoardID                ID              `json:"board_id"`
	WorkflowID             ID              `json:"workflow_id"`
	Title                  string          `json:"title"`
	Description            string          `json:"description"` // HTML
	OwnerUserID            *ID             `json:"owner_user_id"`
	TypeID                 *ID             `json:"type_id"`
	Color                  string          `json:"color"`
	Section                int             `json:"section"`
	ColumnID               ID              `json:"column_id"`
	LaneID                 ID              `json:"lane_id"`
	Position               int             `json:"position"`
	Size                   *float64        `json:"size"`
	Priority               *int            `json:"priority"`
	Deadline               *time.Time      `json:"deadline"`
	Reporter               *Author         `json:"reporter"`
	CreatedAt              *time.Time      `json:"created_at"`
	LastModified           *time.Time      `json:"last_modified"`
	IsBlocked              Flag            `json:"is_blocked"`
	BlockReason            json.RawMessage `json:"block_reason,omitempty"`
	TagIDs                 []ID            `json:"tag_ids"`
	CoOwnerIDs             []ID            `json:"co_owner_ids"`
	WatchersIDs            []ID            `json:"watchers_ids"`
	CustomFields           json.RawMessage `json:"custom_fields,omitempty"`
	LinkedCards            json.RawMessage `json:"linked_cards,omitempty"`
	FinishedSubtaskCount   int             `json:"finished_subtask_count"`
	UnfinishedSubtaskCount int             `json:"unfinished_subtask_count"`
}

// Comment is a comment on a card.
type Comment struct {
	CommentID    ID              `json:"comment_id"`
	Type         string          `json:"type"`
	Text         string          `json:"text"` // HTML
	Attachments  json.RawMessage `json:"attachments,omitempty"`
	CreatedAt    *time.Time      `json:"created_at"`
	LastModified *time.Time      `json:"last_modified"`
	Author       *Author         `json:"author"`
}

// Subtask is a subtask of a card.
type Subtask struct {
	SubtaskID   ID              `json:"subtask_id"`
	Description string          `json:"description"`
	OwnerUserID *ID             `json:"owner_user_id"`
	FinishedAt  *time.Time      `json:"finished_at"` // nil while not finished
	Deadline    *time.Time      `json:"deadline"`
	Position    int             `json:"position"`
	Attachments json.RawMessage `json:"attachments,omitempty"`
}

// Finished reports whether the subtask is done.
func (s Subtask) Finished() bool { return s.FinishedAt != nil }

// Author is who wrote a comment or reported a card: a type ("user",
// "email", ...) and a value whose form depends on it.
type Author struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// CardDetails is a card with its comments and subtasks.
type CardDetails struct {
	Card     Card      `json:"card"`
	Comments []Comment `json:"comments"`
	Subtasks []Subtask `json:"subtasks"`
}

// ID is a Kanbanize identifier. It decodes from a JSON number or a string
// of digits, as different API versions send them, and encodes as a number.
type ID int64

// UnmarshalJSON accepts 345 and "345".
func (id *ID) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	s := string(bytes.Trim(b, `"`))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("kanbanize: %s is not an ID", b)
	}
	*id = ID(n)
	return nil
}

// String returns the decimal form.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Flag is a yes-or-no field: the API sends 0 and 1, sometimes true and
// false. It encodes as a JSON boolean.
type Flag bool

// UnmarshalJSON accepts true, false, 0, 1, "0", "1" and null.
func (f *Flag) UnmarshalJSON(b []byte) error {
	switch string(bytes.Trim(b, `"`)) {
	case "true", "1":
		*f = true
	case "false", "0", "null", "":
		*f = false
	default:
		return fmt.Errorf("kanbanize: %s is not a flag", b)
	}
	return nil
}
