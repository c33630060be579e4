package kanbanize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// The types below decode what the API sends in more than one form: the
// real API has sent numbers as strings, flags as 0 and 1, and timestamps
// with Z, +00:00 or a space between date and time. Each encodes in one,
// canonical form.

// ID is a Kanbanize identifier: a JSON number or a string of digits.
// It encodes as a number.
type ID int64

// UnmarshalJSON accepts 345, "345", "" and null (both 0).
func (id *ID) UnmarshalJSON(b []byte) error {
	n, err := lenientInt(b)
	if err != nil {
		return fmt.Errorf("kanbanize: %s is not an ID", b)
	}
	*id = ID(n)
	return nil
}

// String returns the decimal form.
func (id ID) String() string { return strconv.FormatInt(int64(id), 10) }

// Int is a whole number sent as a JSON number or a string of digits.
type Int int

// UnmarshalJSON accepts 2, "2", 2.0, "" and null (0).
func (n *Int) UnmarshalJSON(b []byte) error {
	v, err := lenientInt(b)
	if err != nil {
		return fmt.Errorf("kanbanize: %s is not a whole number", b)
	}
	*n = Int(v)
	return nil
}

// Float is a number sent as a JSON number or a numeric string.
type Float float64

// UnmarshalJSON accepts 2.5, "2.5", "" and null (0).
func (f *Float) UnmarshalJSON(b []byte) error {
	s := unquote(b)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("kanbanize: %s is not a number", b)
	}
	*f = Float(v)
	return nil
}

// Text is a string the API may send as a number (a custom ID like 17).
// Empty, it encodes as null, as the API sends it.
type Text string

// MarshalJSON writes the string, or null when empty.
func (t Text) MarshalJSON() ([]byte, error) {
	if t == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(t))
}

// UnmarshalJSON accepts "PRJ-17", 17 and null ("").
func (t *Text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Text(s)
		return nil
	}
	s := string(b)
	if s == "null" {
		*t = ""
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return fmt.Errorf("kanbanize: %s is not text", b)
	}
	*t = Text(s)
	return nil
}

// Time is a timestamp; its zero value means the API sent none (null or
// ""), and encodes as null. It reads RFC 3339 with Z or an offset, and
// "2006-01-02 15:04:05" and a bare date, both as UTC.
type Time struct{ time.Time }

var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"}

// UnmarshalJSON reads the forms above.
func (t *Time) UnmarshalJSON(b []byte) error {
	s := unquote(b)
	if s == "" || s == "null" {
		t.Time = time.Time{}
		return nil
	}
	for _, layout := range timeLayouts {
		if v, err := time.Parse(layout, s); err == nil {
			t.Time = v
			return nil
		}
	}
	return fmt.Errorf("kanbanize: %s is not a timestamp", b)
}

// MarshalJSON writes RFC 3339, or null for the zero Time.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.Format(time.RFC3339))
}

// Flag is a yes-or-no field: the API sends 0 and 1, sometimes true and
// false. It encodes as a JSON boolean.
type Flag bool

// UnmarshalJSON accepts true, false, 0, 1, "0", "1" and null.
func (f *Flag) UnmarshalJSON(b []byte) error {
	switch unquote(b) {
	case "true", "1":
		*f = true
	case "false", "0", "null", "":
		*f = false
	default:
		return fmt.Errorf("kanbanize: %s is not a flag", b)
	}
	return nil
}

// unquote is the text of a JSON string, its escapes decoded ("\u0033" is
// a digit too), or another JSON value as it is; without spaces around.
func unquote(b []byte) string {
	var s string
	if len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &s) == nil {
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(string(bytes.Trim(b, `"`)))
}

// lenientInt reads a whole number from a JSON number or string: "" and
// null are 0, and a number with a zero fraction (2.0) is accepted.
func lenientInt(b []byte) (int64, error) {
	s := unquote(b)
	if s == "" || s == "null" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("not a whole number")
	}
	return int64(f), nil
}
