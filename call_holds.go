package ratewise

// holds is a short list of what an attempt holds until its answer:
// concurrency slots, adaptive tickets. Two fit inline, so that holding
// them allocates nothing and the call that keeps them stays on the stack.
type holds[T any] struct {
	inline [2]T
	n      int
	more   []T
}

func (h *holds[T]) add(v T) {
	if h.n < len(h.inline) {
		h.inline[h.n] = v
	} else {
		h.more = append(h.more, v)
	}
	h.n++
}

// drain calls f for every one held, then forgets them.
func (h *holds[T]) drain(f func(T)) {
	for i := range min(h.n, len(h.inline)) {
		f(h.inline[i])
	}
	for _, v := range h.more {
		f(v)
	}
	*h = holds[T]{}
}

// find returns the first of those held that f holds for, and whether
// there is one.
func (h *holds[T]) find(f func(T) bool) (T, bool) {
	for i := range min(h.n, len(h.inline)) {
		if f(h.inline[i]) {
			return h.inline[i], true
		}
	}
	for _, v := range h.more {
		if f(v) {
			return v, true
		}
	}
	var zero T
	return zero, false
}
