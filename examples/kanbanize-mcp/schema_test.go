package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// outputSchemas returns each tool's output schema as a client sees it in
// tools/list, resolved for validation.
func outputSchemas(t *testing.T, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tool := range res.Tools {
		if tool.OutputSchema == nil {
			t.Errorf("%s declares no output schema", tool.Name)
			continue
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: output schema %s: %v", tool.Name, b, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: output schema %s does not resolve: %v", tool.Name, b, err)
		}
		out[tool.Name] = r
	}
	return out
}

// checkOutput validates a result's structured content, as the client
// received it, against the tool's output schema.
func checkOutput(t *testing.T, schemas map[string]*jsonschema.Resolved, tool string, res *mcp.CallToolResult) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: tool error: %s", tool, text(res))
	}
	var v any
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := schemas[tool].Validate(v); err != nil {
		t.Errorf("%s: the result does not match the output schema: %v\n%s", tool, err, b)
	}
}

func TestOutputSchemasMatchResults(t *testing.T) {
	// Every tool's real results, the partial envelope with its
	// partial_error and the stats after retries and waits included,
	// validate against the schema it declares (with the jsonschema
	// library the SDK uses).
	synctest.Test(t, func(t *testing.T) {
		s := connect(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterNone,
			Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{
				kanbanizetest.EndpointComments: {kanbanizetest.Fault429},
				kanbanizetest.EndpointSubtasks: repeat(kanbanizetest.Fault429, 2),
			}})
		schemas := outputSchemas(t, s.ClientSession)
		if len(schemas) != 3 {
			t.Fatalf("%d output schemas, want 3", len(schemas))
		}
		partial := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "max_attempts": 2, "initial_delay_ms": 1}, nil)
		checkOutput(t, schemas, "read_card_with_retry", partial)
		if !strings.Contains(text(partial), `"partial_error":{"subtasks":`) {
			t.Errorf("read_card_with_retry = %s, want the subtasks partial", text(partial))
		}
		checkOutput(t, schemas, "read_card_with_retry", s.call(t, "read_card_with_retry", map[string]any{"card_id": 101}, nil))
		checkOutput(t, schemas, "read_card", s.call(t, "read_card", map[string]any{"card_id": "103"}, nil))
		stats := s.call(t, "get_throttle_stats", nil, nil)
		checkOutput(t, schemas, "get_throttle_stats", stats)
		for _, want := range []string{`"retries_by_reason":{"429":2}`, `"waits_by_kind":{`, `"breakers":[{`} {
			if !strings.Contains(text(stats), want) {
				t.Errorf("get_throttle_stats = %s, lacks %s: the schema was not tried on it", text(stats), want)
			}
		}

		// The schemas hold the results to their shape: an envelope without
		// its data, or counting attempts in words, does not pass.
		b, _ := json.Marshal(partial.StructuredContent)
		for name, spoil := range map[string]func(map[string]any){
			"no data":         func(e map[string]any) { delete(e, "data") },
			"attempts a word": func(e map[string]any) { e["attempts"].(map[string]any)["card"] = "one" },
			"an unknown part": func(e map[string]any) { e["partial_error"].(map[string]any)["attachments"] = "refused" },
			"no card ID":      func(e map[string]any) { delete(e["data"].(map[string]any)["card"].(map[string]any), "card_id") },
		} {
			var e map[string]any
			_ = json.Unmarshal(b, &e)
			spoil(e)
			if err := schemas["read_card_with_retry"].Validate(e); err == nil {
				t.Errorf("an envelope with %s validates, want an error", name)
			}
		}
	})
}

func TestCardIDAsNumber(t *testing.T) {
	// MCP clients and models send {"card_id": 101} as often as
	// {"card_id": "101"}: both tools take either, and 101.0 too.
	s := connect(t, kanbanizetest.Config{})
	for _, args := range []any{map[string]any{"card_id": 101}, json.RawMessage(`{"card_id": 101.0}`), map[string]any{"card_id": "101"}} {
		for _, tool := range []string{"read_card", "read_card_with_retry"} {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil || res.IsError {
				t.Errorf("%s(%v) = %v, %v", tool, args, text(res), err)
				continue
			}
			if !strings.Contains(text(res), `"card_id":101,`) {
				t.Errorf("%s(%v) = %s, want card 101", tool, args, text(res))
			}
			if tool == "read_card_with_retry" && !strings.Contains(text(res), `"card_id":"101","completed"`) {
				t.Errorf("%s(%v) = %s, want the envelope of card_id \"101\"", tool, args, text(res))
			}
		}
	}
	sent := s.fake.Stats().Requests
	for _, bad := range []string{`1.5`, `0`, `-4`, `true`, `null`, `[101]`} {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_card_with_retry", Arguments: json.RawMessage(`{"card_id": ` + bad + `}`)})
		if err != nil || !res.IsError || !strings.Contains(text(res), "card_id") {
			t.Errorf("card_id %s: %v, %v; want a tool error naming card_id", bad, text(res), err)
		}
	}
	if n := s.fake.Stats().Requests; n != sent {
		t.Errorf("%d requests sent for bad card IDs, want none", n-sent)
	}
}

func TestCardRefUnmarshal(t *testing.T) {
	tests := []struct {
		give    string
		want    cardRef
		wantErr bool
	}{
		{give: `"345"`, want: "345"},
		{give: `"https://acme.kanbanize.com/ctrl_board/12/cards/345/details/"`, want: "https://acme.kanbanize.com/ctrl_board/12/cards/345/details/"},
		{give: `345`, want: "345"},
		{give: `345.0`, want: "345"},
		{give: `3.45e2`, want: "345"},
		{give: `123456789012345678901234567890`, want: "123456789012345678901234567890"}, // kept exact; ParseCardID refuses it
		{give: `1.5`, wantErr: true},
		{give: `0`, want: "0"}, // digits: ParseCardID refuses it
		{give: `-4`, wantErr: true},
		{give: `1e300`, wantErr: true},
		{give: `true`, wantErr: true},
		{give: `null`, wantErr: true},
	}
	for _, tt := range tests {
		var got cardRef
		err := json.Unmarshal([]byte(tt.give), &got)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("unmarshal %s = %q, %v; want %q, error %v", tt.give, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "card_id is "+tt.give) {
			t.Errorf("unmarshal %s: error %q does not say what was sent", tt.give, err)
		}
	}
}
