// Package learntest holds servers, reduced to what they answer, that the
// tests of a learned pace run against: the Go reference (learn.Shared)
// and the Redis script that mirrors it alike.
package learntest

import (
	"math"
	"time"

	"github.com/ratewise/ratewise/store"
)

// SlidingCounter is a sliding-window counter of Limit requests a second,
// as go-chi's httprate keeps one: this fixed window's requests plus the
// last one's, weighted by the share of it still inside the sliding
// window. Its counts say none is left while it lets Limit a second
// through; it refuses with a hint of the whole window. The zero value
// with Limit set is ready to use.
type SlidingCounter struct {
	Limit      int
	window     time.Time // the current fixed window's start
	prev, curr int       // the last window's requests and this one's
}

// Answer is the outcome of turn seq sent at now, with the count the
// server's headers carry.
func (c *SlidingCounter) Answer(seq uint64, now time.Time) store.Outcome {
	if w := now.Truncate(time.Second); w != c.window {
		c.prev = 0
		if w.Sub(c.window) == time.Second {
			c.prev = c.curr
		}
		c.window, c.curr = w, 0
	}
	weighted := float64(c.prev) * (1 - now.Sub(c.window).Seconds())
	o := store.Outcome{Seq: seq, Kind: store.Answered, Counted: true, Limit: c.Limit, Reset: c.window.Add(time.Second).Sub(now)}
	if weighted+float64(c.curr) >= float64(c.Limit) {
		o.Kind, o.Hint = store.Refused, time.Second
		return o
	}
	c.curr++
	o.Remaining = int(math.Max(0, float64(c.Limit)-weighted-float64(c.curr)))
	return o
}
