// Package scopes is the limit scopes at work: for each scope, one state
// per key, which admits a request as its limit says (a concurrency slot,
// then a turn of a told bucket, spacing or window, of a store's bucket,
// or of the pace learned from the server's answers, the fleet's when a
// store keeps it), and which the answers teach.
//
// The package names no type of ratewise. It takes what it needs of a
// call as values (a Request: the context, the priority, the told limits
// that pace it, what a store answered beforehand) and the key the
// caller's KeyFunc gave; it says how long to wait, and the call waits,
// within its budget, through the Request's Wait. A request let go gets a
// Grant: a Ticket, which its answer finishes (Ticket.Finish), a Slot,
// released when its response is done with, and whether a told window's
// turn was given. Answers no pace let go teach through Untracked and
// TrialAnswered.
//
// The engines it drives are internal/limit (the told limit of one key)
// and internal/learn (the learned pace); internal/keyed keeps the
// states, and forgets idle ones.
package scopes
