// Package kanbanizetest is a fake Kanbanize (Businessmap) API v2 for tests,
// demos and the MCP server. It serves cards, comments and subtasks from
// fixtures, checks the apikey header, enforces per-minute and per-hour
// limits the way the real API does (per key, or per account), tells them
// at GET /api/v2/apiLimits, and injects scripted faults.
//
// A [Server] runs in-process through [Server.Transport], an
// [http.RoundTripper] that touches no network and starts no goroutine, so
// it works inside [testing/synctest] bubbles with fake time; or on loopback
// through [Server.Start].
//
// The fake serves these paths, answering GET only:
//
//	/api/v2/cards/{card_id}           {"data": Card}
//	/api/v2/cards/{card_id}/comments  {"data": [Comment]}
//	/api/v2/cards/{card_id}/subtasks  {"data": [Subtask]}
//	/api/v2/apiLimits                 {"data": [{"types": "minutely", "limit": PerMinute}, {"types": "hourly", "limit": PerHour}]}
//
// GET /api/v2/apiLimits answers the Config's limits in the shape of the
// API's OpenAPI document (an ApiLimit of "types" and "limit" per window);
// like every request, it takes a token from the key's buckets and can be
// refused or scripted (EndpointAPILimits).
//
// in the shapes the API publishes: a card with its timeline, linked cards,
// embedded subtasks and attachments, its watchers as "watcher_ids" or, on
// some cards, "watchers_ids"; comments written on the board with an
// author, and comments sent or received as email with a sender and
// recipients to, cc and bcc; people as internal users or external
// addresses.
//
// Every error has the body {"error":{"code":…,"message":…,"reference":…}}:
// AU01 (401) for a missing or wrong key, CA01 (404) for an unknown card,
// RL01 (429) or RL02 (400) for a rate-limit refusal, and the fake's own
// NF01 (404) for an unknown path, MA01 (405) for a method other than GET
// and FB01 (403) for a card whose fixture is Forbidden, whose body has
// "details" too.
//
// The package imports neither ratewise nor kanbanize, so their tests can
// use it.
//
// # Fixtures
//
// Fixtures returns n deterministic fixtures with card IDs FirstCardID,
// FirstCardID+1, … The card at index i (ID 100+i) has i%5 comments and
// i%4 subtasks, so card 100 has neither, and its title is titles[i%10],
// starting "Set up CI pipeline", "Fix login redirect loop", "Migrate
// invoices to the new schema". Cards at even indexes write times with "Z",
// those at odd indexes with "+00:00". Cards at indexes 1, 4, 7, … send
// their watchers as "watchers_ids", the others as "watcher_ids". Cards at
// indexes 3, 8, 13, … carry unknown extra fields. The subtask counts of
// each card match its subtasks, which the card embeds too. Comment 2 of a
// card, when it has one, was sent as email and comment 3 received as
// email; the others are plain. The card at index 2, 6, 10, … has the card
// before it as its child, which has it as its parent. Fixtures returns an
// empty, non-nil slice for n <= 0, so that Config{Cards: Fixtures(0)}
// serves no cards.
package kanbanizetest
