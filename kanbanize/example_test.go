package kanbanize_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// Read a card with its comments and subtasks from the fake API, in
// process. Its subtasks endpoint fails with malformed JSON: the envelope
// keeps the card, with the subtasks it embeds, and the comments, and says
// what went wrong. The fake names this card's watchers "watchers_ids",
// as the OpenAPI document of 2023 does; the card writes "watcher_ids".
func ExampleClient_ReadCardWithRetry() {
	fake := kanbanizetest.New(kanbanizetest.Config{
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointSubtasks: {kanbanizetest.FaultMalformedJSON}},
	})
	client, err := kanbanize.NewClient("acme", kanbanizetest.DefaultAPIKey,
		kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()}))
	if err != nil {
		fmt.Println(err)
		return
	}
	env, err := client.ReadCardWithRetry(context.Background(), "https://acme.kanbanize.com/ctrl_board/1/cards/101/details/", kanbanize.RetryOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(env)
	// Output:
	// {
	//   "card_id": "101",
	//   "attempts": {
	//     "card": 1,
	//     "comments": 1,
	//     "subtasks": 1
	//   },
	//   "wait_seconds": 0,
	//   "rate_limit_hits": 0,
	//   "completed": {
	//     "card": true,
	//     "comments": true,
	//     "subtasks": false
	//   },
	//   "partial_error": {
	//     "subtasks": "GET /cards/101/subtasks: malformed JSON: unexpected EOF"
	//   },
	//   "data": {
	//     "title": "Fix login redirect loop",
	//     "card": {
	//       "card_id": 101,
	//       "custom_id": null,
	//       "board_id": 2,
	//       "workflow_id": 21,
	//       "title": "Fix login redirect loop",
	//       "description": "<p>Fix login redirect loop.</p><p>Notes &amp; links for card 101.</p>",
	//       "owner_user_id": 2,
	//       "type_id": 2,
	//       "color": "f37325",
	//       "section": 2,
	//       "column_id": 22,
	//       "lane_id": 202,
	//       "position": 1,
	//       "last_column_id": 21,
	//       "last_lane_id": 202,
	//       "size": 2,
	//       "priority": 2,
	//       "deadline": null,
	//       "reporter": {
	//         "type": "user",
	//         "value": 4
	//       },
	//       "created_at": "2025-01-07T11:00:00Z",
	//       "last_modified": "2025-01-09T11:00:00Z",
	//       "revision": 4,
	//       "in_current_position_since": "2025-01-07T13:00:00Z",
	//       "first_request_time": "2025-01-07T13:00:00Z",
	//       "first_start_time": null,
	//       "first_end_time": null,
	//       "last_request_time": "2025-01-07T13:00:00Z",
	//       "last_start_time": null,
	//       "last_end_time": null,
	//       "is_blocked": false,
	//       "block_reason": null,
	//       "tag_ids": [
	//         2,
	//         6
	//       ],
	//       "milestone_ids": [],
	//       "co_owner_ids": [
	//         2,
	//         3
	//       ],
	//       "watcher_ids": [
	//         2
	//       ],
	//       "custom_fields": [],
	//       "stickers": [],
	//       "annotations": [],
	//       "attachments": [
	//         {
	//           "id": 1018,
	//           "file_name": "spec-101.pdf",
	//           "link": "https://files.kanbanize.test/spec-101.pdf",
	//           "position": 0
	//         }
	//       ],
	//       "cover_image": null,
	//       "linked_cards": [
	//         {
	//           "card_id": 102,
	//           "link_type": "parent"
	//         }
	//       ],
	//       "child_card_stats": {
	//         "child_card_size_sum": 0,
	//         "finished_bottom_child_card_size_sum": 0,
	//         "unfinished_bottom_child_card_size_sum": 0,
	//         "has_unfinished_child_cards": false,
	//         "last_unfinished_child_card_deadline": null
	//       },
	//       "subtasks": [
	//         {
	//           "subtask_id": 1015,
	//           "description": "Step 1 of card 101",
	//           "owner_user_id": 2,
	//           "finished_at": null,
	//           "deadline": "2025-01-21T11:00:00Z",
	//           "position": 0,
	//           "attachments": []
	//         }
	//       ],
	//       "finished_subtask_count": 0,
	//       "unfinished_subtask_count": 1
	//     },
	//     "comments": [
	//       {
	//         "comment_id": 1010,
	//         "type": "plain",
	//         "text": "<p>Update 1 on <b>card 101</b>.</p>",
	//         "attachments": [],
	//         "created_at": "2025-01-07T14:00:00Z",
	//         "last_modified": null,
	//         "author": {
	//           "type": "internal",
	//           "value": 2
	//         }
	//       }
	//     ],
	//     "subtasks": []
	//   }
	// }
}

// WithLogger logs what the client and its transport do as structured
// lines: here the subtasks endpoint answers malformed JSON, and the read
// goes on without them, logged as event=rate_partial at Warn. Retries
// and waits would show as rate_retry and rate_wait. The handler drops
// the time so that the output is stable.
func ExampleWithLogger() {
	fake := kanbanizetest.New(kanbanizetest.Config{
		Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointSubtasks: {kanbanizetest.FaultMalformedJSON}},
	})
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	client, err := kanbanize.NewClient("acme", kanbanizetest.DefaultAPIKey,
		kanbanize.WithHTTPClient(&http.Client{Transport: fake.Transport()}), kanbanize.WithLogger(log))
	if err != nil {
		fmt.Println(err)
		return
	}
	env, err := client.ReadCardWithRetry(context.Background(), "101", kanbanize.RetryOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("completed:", env.Completed)
	// Output:
	// level=WARN msg="card read without its subtasks" event=rate_partial endpoint=subtasks error="GET /cards/101/subtasks: malformed JSON: unexpected EOF" attempts=1 card_id=101
	// completed: map[card:true comments:true subtasks:false]
}
