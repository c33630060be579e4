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
package kanbanizetest
