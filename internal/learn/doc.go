// Package learn is the learned pace of an adaptive limit: what one key's
// server lets through, learned from its answers instead of being told. A
// Pacer reads the counts of the server's quota that answers carry
// (count.go); where they carry none, it takes the server for a token
// bucket, measured between two refusals (pacer.go), or for a window that
// gives its quota back all at once (window.go). It also holds the line
// the key's requests wait in (line.go), whose head alone waits for the
// pace, so that a pace that changes applies at once to every waiter.
//
// The package names no type of ratewise. The transport reads each answer
// with ReadAnswer and admits a request with TakeAlone, or, when others
// wait, with Join, Head, Take, ReleaseHead and Leave; each request let go
// is then answered with Outcome or withdrawn with Cancel. What answered
// requests the key did not pace teach goes to Untracked. Methods that
// look at the time take now as an argument, so they test without a clock.
//
// Before its first signal, a key opens up in a slow start (Start), one
// more request in flight for each success, and a key whose slow start
// ended with nothing learned is remembered as such (Answered).
//
// Shared is the same learning for a fleet, as a store keeps it
// (store.Learned): the turns every replica takes, and the refusals and
// counts any replica sees (shared.go).
package learn
