package ratewise

import "time"

// maxWindowBurst bounds Limit.Burst with a Window: the scope remembers
// each start of the last window, per key.
const maxWindowBurst = 1 << 16

// windowMargin is how long after a start leaves the window the turn it
// frees comes: a server that counts its window from when the request
// arrived, or ends it on its last instant, sees the next one a little
// later than it was sent.
const windowMargin = 5 * time.Millisecond

// windowLog is a key's sliding log for a Limit with a Window: the starts
// of the requests of the last window, and the turns reserved after it, in
// order. A request may start when fewer than Burst did in the Window
// before; one past it takes the turn the oldest start frees, a Window
// (and windowMargin) after it. The methods take the Limit's Window and
// add the margin themselves. Held in a ring of Burst entries.
type windowLog struct {
	at   []time.Time // oldest at head
	head int
	n    int
}

// left counts the oldest starts that left a window of length window by
// now: a start leaves it window and windowMargin after it.
func (w *windowLog) left(now time.Time, window time.Duration) int {
	i := 0
	for i < w.n && !w.at[(w.head+i)%len(w.at)].Add(window+windowMargin).After(now) {
		i++
	}
	return i
}

// expire drops the starts that left the window by now.
func (w *windowLog) expire(now time.Time, window time.Duration) {
	gone := w.left(now, window)
	w.head, w.n = (w.head+gone)%len(w.at), w.n-gone
}

// last is the latest start or turn taken; zero when none.
func (w *windowLog) last() time.Time {
	if w.n == 0 {
		return time.Time{}
	}
	return w.at[(w.head+w.n-1)%len(w.at)]
}

// take reserves the request's turn at now: at once when the window has
// room, else when its oldest start leaves it (never before a turn already
// taken, so that the log stays in order).
func (w *windowLog) take(now time.Time, limit int, window time.Duration) (time.Duration, turn) {
	if len(w.at) != limit {
		w.resize(limit)
	}
	w.expire(now, window)
	start := now
	var freed time.Time
	if w.n == limit {
		freed = w.at[w.head]
		start = freed.Add(window + windowMargin)
		w.head = (w.head + 1) % limit
		w.n--
	}
	if last := w.last(); last.After(start) {
		start = last
	}
	w.at[(w.head+w.n)%limit] = start
	w.n++
	return start.Sub(now), turn{windowAt: start, windowFreed: freed}
}

// giveBack undoes the turn t took, when it is still the last one taken:
// with others reserved behind it, its place stays taken (they keep the
// log's order), which costs at most one turn of a window.
func (w *windowLog) giveBack(t turn) {
	if w.n == 0 || !w.last().Equal(t.windowAt) {
		return
	}
	w.n--
	if !t.windowFreed.IsZero() {
		w.head = (w.head - 1 + len(w.at)) % len(w.at)
		w.at[w.head] = t.windowFreed
		w.n++
	}
}

// resize makes room for limit starts, keeping the latest.
func (w *windowLog) resize(limit int) {
	at := make([]time.Time, limit)
	keep := min(w.n, limit)
	for i := range keep {
		at[i] = w.at[(w.head+w.n-keep+i)%len(w.at)]
	}
	w.at, w.head, w.n = at, 0, keep
}

// idle reports whether every start has left the window by now.
func (w *windowLog) idle(now time.Time, window time.Duration) bool {
	return w.n == 0 || !w.last().Add(window+windowMargin).After(now)
}

// room is how many more requests may start at now.
func (w *windowLog) room(now time.Time, limit int, window time.Duration) int {
	return max(limit-(w.n-w.left(now, window)), 0)
}
