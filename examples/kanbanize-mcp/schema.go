package main

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// cardRef is a card_id argument: the card's number or URL as a string, or
// its number as a JSON number, as MCP clients and models send it
// ({"card_id": 345} as often as {"card_id": "345"}). It holds the string
// that kanbanize.ParseCardID reads.
type cardRef string

// UnmarshalJSON accepts a string, kept as it is, or a whole number, kept
// in its decimal form; anything else is an error naming what was sent.
func (c *cardRef) UnmarshalJSON(b []byte) error {
	lit := strings.TrimSpace(string(b))
	if strings.HasPrefix(lit, `"`) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = cardRef(s)
		return nil
	}
	if lit != "" && strings.Trim(lit, "0123456789") == "" {
		*c = cardRef(lit) // digits only: kept exact, however long
		return nil
	}
	// 345.0 or 3.45e2: a whole number written otherwise.
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > 1<<53 {
		return fmt.Errorf("card_id is %s: send the card's number (345) or URL, as a string or a whole number", lit)
	}
	*c = cardRef(strconv.FormatInt(int64(f), 10))
	return nil
}

// cardIDSchema is the schema of card_id in both tools' input: a string,
// or a whole number from 1 (minimum holds for numbers only).
func cardIDSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"string", "integer"}, Minimum: jsonschema.Ptr(1.0)}
}

// inputSchema infers the input schema of a tool's arguments, card_id
// taking a string or a number.
func inputSchema[T any]() (*jsonschema.Schema, error) {
	return jsonschema.For[T](&jsonschema.ForOptions{
		TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[cardRef](): cardIDSchema()},
	})
}

// The tools' output schemas. They are written out rather than inferred
// from the Go types, whose JSON is written by MarshalJSON methods (seconds
// for durations, null for an empty custom ID) that inference cannot see.
// They say exactly what the server's own structures hold and, of the
// card, comments and subtasks the API sends, only their IDs and the
// card's title: the API adds fields, and a result that does not match its
// schema fails the call.
const (
	// cardDefs describe what the API returns, in $defs.
	cardDefs = `"$defs": {
  "card": {"type": "object", "description": "the card as the Kanbanize API returns it",
    "required": ["card_id", "title"],
    "properties": {"card_id": {"type": "integer"}, "title": {"type": "string"}}},
  "comment": {"type": "object", "description": "a comment as the Kanbanize API returns it",
    "required": ["comment_id"], "properties": {"comment_id": {"type": "integer"}}},
  "subtask": {"type": "object", "description": "a subtask as the Kanbanize API returns it",
    "required": ["subtask_id"], "properties": {"subtask_id": {"type": "integer"}}}
}`

	// readCardOutput is read_card's result, a kanbanize.CardDetails.
	readCardOutput = `{
"type": "object",
"required": ["card", "comments", "subtasks"],
"additionalProperties": false,
"properties": {
  "card": {"$ref": "#/$defs/card"},
  "comments": {"type": "array", "items": {"$ref": "#/$defs/comment"}},
  "subtasks": {"type": "array", "items": {"$ref": "#/$defs/subtask"}}
},
` + cardDefs + `}`

	// readCardWithRetryOutput is read_card_with_retry's result, a
	// kanbanize.Envelope.
	readCardWithRetryOutput = `{
"type": "object",
"required": ["card_id", "attempts", "wait_seconds", "rate_limit_hits", "completed", "data"],
"additionalProperties": false,
"properties": {
  "card_id": {"type": "string", "description": "the card's number"},
  "attempts": {"type": "object", "description": "requests sent to each endpoint, the first included",
    "required": ["card", "comments", "subtasks"], "additionalProperties": false,
    "properties": {"card": {"type": "integer", "minimum": 0}, "comments": {"type": "integer", "minimum": 0},
      "subtasks": {"type": "integer", "minimum": 0}}},
  "wait_seconds": {"type": "number", "minimum": 0,
    "description": "time spent waiting; the comments and subtasks waiting side by side count once"},
  "pace_wait_seconds": {"type": "number", "minimum": 0,
    "description": "time the reads waited for their turn in the account's pace (its plan, or the pace learned), summed over the three reads; absent when none"},
  "refusal_wait_seconds": {"type": "number", "minimum": 0,
    "description": "time the reads waited because the API refused (backoffs, a pause it asked for, the breaker), summed over the three reads; absent when none"},
  "rate_limit_hits": {"type": "integer", "minimum": 0, "description": "answers that were rate-limit refusals"},
  "completed": {"type": "object", "description": "whether each endpoint was read",
    "required": ["card", "comments", "subtasks"], "additionalProperties": false,
    "properties": {"card": {"type": "boolean"}, "comments": {"type": "boolean"}, "subtasks": {"type": "boolean"}}},
  "partial_error": {"type": "object", "description": "why the comments or subtasks could not be read; absent when everything was",
    "additionalProperties": false,
    "properties": {"comments": {"type": "string"}, "subtasks": {"type": "string"}}},
  "data": {"type": "object", "required": ["title", "card", "comments", "subtasks"], "additionalProperties": false,
    "properties": {
      "title": {"type": "string"},
      "card": {"$ref": "#/$defs/card"},
      "comments": {"type": "array", "items": {"$ref": "#/$defs/comment"}, "description": "empty when they could not be read"},
      "subtasks": {"type": "array", "items": {"$ref": "#/$defs/subtask"}, "description": "empty when they could not be read"}
    }}
},
` + cardDefs + `}`

	// throttleStatsOutput is get_throttle_stats's result: ratewise.Stats,
	// the transport's ratewise.BreakerStatus values and the account's
	// ratewise.KeyStatus.
	throttleStatsOutput = `{
"type": "object",
"required": ["stats", "breakers", "limits"],
"additionalProperties": false,
"properties": {
  "stats": {"type": "object",
    "required": ["calls", "attempts", "retries", "rate_limit_hits", "succeeded", "aborts", "waits",
      "total_wait_seconds", "average_wait_seconds"],
    "properties": {
      "calls": {"type": "integer", "minimum": 0, "description": "calls (reads of the API, retries and all) that have ended"},
      "attempts": {"type": "integer", "minimum": 0, "description": "requests sent to the API, retries included"},
      "retries": {"type": "integer", "minimum": 0},
      "rate_limit_hits": {"type": "integer", "minimum": 0},
      "succeeded": {"type": "integer", "minimum": 0},
      "aborts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0},
        "description": "requests given up, by reason"},
      "waits": {"type": "integer", "minimum": 0},
      "total_wait_seconds": {"type": "number", "minimum": 0},
      "average_wait_seconds": {"type": "number", "minimum": 0},
      "last_error": {"type": "string"},
      "retries_by_reason": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
      "rate_limit_hits_by_key": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
      "waits_by_kind": {"type": "object", "additionalProperties": {"type": "object",
        "required": ["count", "buckets", "total_seconds"],
        "properties": {"count": {"type": "integer", "minimum": 0}, "total_seconds": {"type": "number", "minimum": 0},
          "buckets": {"type": "array", "items": {"type": "integer", "minimum": 0}}}}}
    }},
  "breakers": {"type": "array", "description": "each API key's circuit breaker",
    "items": {"type": "object", "required": ["state", "level", "requests", "failures", "consecutive_failures", "reset_in_seconds"],
      "properties": {
        "key": {"type": "string"},
        "state": {"enum": ["closed", "half-open", "open"]},
        "level": {"type": "integer", "minimum": 0},
        "requests": {"type": "integer", "minimum": 0},
        "failures": {"type": "integer", "minimum": 0},
        "consecutive_failures": {"type": "integer", "minimum": 0},
        "reset_in_seconds": {"type": "number", "minimum": 0},
        "opened_at": {"type": "string"},
        "cause": {"type": "object"}
      }}},
  "limits": {"type": "object", "description": "what holds calls back now, keyed by the API's host",
    "required": ["key", "paused_for_seconds"],
    "properties": {
      "key": {"type": "string"},
      "paused_for_seconds": {"type": "number", "minimum": 0, "description": "what is left of a pause the API asked for"},
      "scopes": {"type": "array", "description": "the plan's limits, per API key (its hash), and the pace learned from refusals",
        "items": {"type": "object", "required": ["name", "key", "tokens", "rate_per_second", "burst"],
          "properties": {
            "name": {"type": "string"}, "key": {"type": "string"},
            "tokens": {"type": "number"}, "rate_per_second": {"type": "number", "minimum": 0},
            "burst": {"type": "integer", "minimum": 0},
            "adaptive": {"type": "boolean"}, "learned_rate_per_second": {"type": "number", "minimum": 0},
            "windowed": {"type": "boolean"}, "counted": {"type": "boolean"}
          }}},
      "breaker": {"type": "object"}
    }}
}
}`
)

// outputSchema parses one of the output schemas above.
func outputSchema(text string) (*jsonschema.Schema, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, fmt.Errorf("an output schema does not parse: %w", err)
	}
	return &s, nil
}
