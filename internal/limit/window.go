package limit

import "time"

// MaxWindowBurst bounds Limit.Burst with a Window: the scope remembers
// each start of the last window, per key.
const MaxWindowBurst = 1 << 16

// WindowMargin is how long after a start leaves the window the turn it
// frees comes: a server that counts its window from when the request
// arrived, or ends it on its last instant, sees the next one a little
// later than it was sent.
const WindowMargin = 5 * time.Millisecond

// windowLog is a key's sliding log for a Limit with a Window: the starts
// of the requests of the last window, and the turns reserved after it, in
// order. A request may start when fewer than Burst did in the Window
// before; one past it takes the turn the oldest start frees, a Window
// (and WindowMargin) after it. The methods take the Limit's Window and
// add the margin themselves. Held in a ring of Burst entries.
type windowLog struct {
	at   []time.Time // oldest at head
	head int
	n    int
	// turn, when set, is when the server said the window it counted the
	// starts up to covers in ends (a count's reset, see align.go): those
	// starts leave at turn, when it comes before a Window after them.
	turn, covers time.Time
	// held keeps, oldest first, the starts that left by turn before
	// their own Window was out, until the turn is shown right (hold
	// unset) or wrong (restore).
	held []time.Time
	hold bool
	// notBefore, when set, is when the next turn may come at the
	// earliest: the server's window, opened by a request that reached it
	// late, had not turned when the window's turn came (late.go).
	notBefore time.Time
}

// ownEnd is when start s leaves a window of length window by its own
// Window: window and WindowMargin after it.
func ownEnd(s time.Time, window time.Duration) time.Time { return s.Add(window + WindowMargin) }

// leaves is when start s leaves a window of length window: its ownEnd,
// or WindowMargin after the server's turn when that comes first and
// counted s.
func (w *windowLog) leaves(s time.Time, window time.Duration) time.Time {
	if !w.turn.IsZero() && !s.After(w.covers) && w.turn.Before(s.Add(window)) {
		return w.turn.Add(WindowMargin)
	}
	return ownEnd(s, window)
}

// left counts the oldest starts that left a window of length window by
// now (leaves; their ownEnd when own). The starts' leaving times are in
// their order: a turn moves those it covers, the oldest, no later than a
// Window after them.
func (w *windowLog) left(now time.Time, window time.Duration, own bool) int {
	i := 0
	for ; i < w.n; i++ {
		s := w.at[(w.head+i)%len(w.at)]
		end := w.leaves(s, window)
		if own {
			end = ownEnd(s, window)
		}
		if end.After(now) {
			break
		}
	}
	return i
}

// plainStart is when n more starts could go at now by the starts alone,
// with no turn of the server's (leaves): how take would have given them.
func (w *windowLog) plainStart(now time.Time, limit int, window time.Duration, n int) time.Time {
	gone := w.left(now, window, true)
	start := now
	if over := w.n - gone + n - limit; over > 0 {
		start = ownEnd(w.at[(w.head+gone+over-1)%len(w.at)], window)
	}
	if last := w.last(); last.After(start) {
		start = last
	}
	return start
}

// expire drops the starts that left the window by now.
func (w *windowLog) expire(now time.Time, window time.Duration) {
	w.drop(w.left(now, window, false), now, window)
}

// drop drops the gone oldest starts, which left the window by at; while
// hold, held keeps those a turn let go before their own Window was out,
// and drop returns how many.
func (w *windowLog) drop(gone int, at time.Time, window time.Duration) (kept int) {
	for len(w.held) > 0 && !ownEnd(w.held[0], window).After(at) {
		w.held = w.held[1:] // out of its own Window too: nothing to restore
	}
	if w.hold {
		for i := range gone {
			if s := w.at[(w.head+i)%len(w.at)]; ownEnd(s, window).After(at) {
				w.held = append(w.held, s)
				kept++
			}
		}
	}
	w.head, w.n = (w.head+gone)%len(w.at), w.n-gone
	return kept
}

// restore drops the server's turn: the starts it let go early come back
// to the log, with those taken since but before from, the latest limit
// of them, and each leaves a Window after it again.
func (w *windowLog) restore(now time.Time, limit int, window time.Duration, from time.Time) {
	all := w.held[:0]
	for _, s := range w.held {
		if ownEnd(s, window).After(now) {
			all = append(all, s)
		}
	}
	for i := range w.n {
		if s := w.at[(w.head+i)%len(w.at)]; s.Before(from) {
			all = append(all, s)
		}
	}
	keep := min(len(all), limit)
	if len(w.at) != limit {
		w.at = make([]time.Time, limit)
	}
	copy(w.at, all[len(all)-keep:])
	w.head, w.n = 0, keep
	w.turn, w.held, w.hold = time.Time{}, nil, false
}

// last is the latest start or turn taken; zero when none.
func (w *windowLog) last() time.Time {
	if w.n == 0 {
		return time.Time{}
	}
	return w.at[(w.head+w.n-1)%len(w.at)]
}

// take reserves n turns at now, for a request (n 1) or for Acquire, all
// at the time the last of them comes: at once when the window has room
// for n more, else when the oldest starts that must leave to make that
// room have left it (never before a turn already taken, so that the log
// stays in order). n is at most limit.
func (w *windowLog) take(now time.Time, limit int, window time.Duration, n int) (time.Duration, turn) {
	if len(w.at) != limit {
		w.resize(limit)
	}
	var t turn
	var plain time.Time // while a server's turn is on trial: when the turn would come without it
	if w.hold {
		plain = w.plainStart(now, limit, window, n)
	}
	w.expire(now, window)
	start := now
	if over := w.n + n - limit; over > 0 {
		// The over oldest starts make room; the last of them to leave
		// says when.
		if over > 1 {
			t.windowFreedOlder = make([]time.Time, over-1)
			for i := range over - 1 {
				t.windowFreedOlder[i] = w.at[(w.head+i)%limit]
			}
		}
		t.windowFreed = w.at[(w.head+over-1)%limit]
		start = w.leaves(t.windowFreed, window)
		t.windowHeld = w.drop(over, start, window)
	}
	if last := w.last(); last.After(start) {
		start = last
	}
	if start.Before(w.notBefore) {
		start = w.notBefore
	}
	for i := range n {
		w.at[(w.head+w.n+i)%limit] = start
	}
	w.n += n
	t.windowAt, t.windowN = start, n
	t.windowEarly = start.Before(plain)
	return start.Sub(now), t
}

// giveBack undoes the turns t took, when they are still the last ones
// taken: with others reserved behind them, their places stay taken (they
// keep the log's order), which costs at most t's turns of a window.
func (w *windowLog) giveBack(t turn) {
	if w.n < t.windowN || !w.last().Equal(t.windowAt) {
		return
	}
	w.n -= t.windowN
	if t.windowFreed.IsZero() {
		return
	}
	if w.hold && len(w.held) >= t.windowHeld {
		w.held = w.held[:len(w.held)-t.windowHeld] // back in the log, below
	}
	// The starts that made room go back to the head, newest first.
	w.unshift(t.windowFreed)
	for i := len(t.windowFreedOlder) - 1; i >= 0; i-- {
		w.unshift(t.windowFreedOlder[i])
	}
}

// unshift puts a start back at the head of the log, as its oldest.
func (w *windowLog) unshift(at time.Time) {
	w.head = (w.head - 1 + len(w.at)) % len(w.at)
	w.at[w.head] = at
	w.n++
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
	return w.n == 0 || !w.leaves(w.last(), window).After(now)
}

// room is how many more requests may start at now.
func (w *windowLog) room(now time.Time, limit int, window time.Duration) int {
	return max(limit-(w.n-w.left(now, window, false)), 0)
}

// WindowLog is a key's sliding log of starts kept for a fleet, by a store
// (store.Windows): a Limit's Window as one transport keeps it. The zero
// value is empty; it is not safe for concurrent use.
type WindowLog struct{ log windowLog }

// Take takes a start at now of limit per window, when it comes within
// maxWait, and returns how long until it and true; otherwise it takes
// nothing, and returns how long until one would come.
func (w *WindowLog) Take(now time.Time, limit int, window, maxWait time.Duration) (time.Duration, bool) {
	wait, t := w.log.take(now, limit, window, 1)
	if wait > max(maxWait, 0) {
		w.log.giveBack(t)
		return wait, false
	}
	return wait, true
}

// Idle reports whether every start has left the window by now.
func (w *WindowLog) Idle(now time.Time, window time.Duration) bool {
	return w.log.idle(now, window)
}
