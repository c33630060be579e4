package ratewise

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// This file is the MemoryStore's store.Windows: the reference of a told
// window a fleet shares, which ratewise/redis keeps in a sorted set.

var _ store.Windows = (*MemoryStore)(nil)

// memWindow is a key's window log, and the window it was last taken
// under, to tell when it is idle.
type memWindow struct {
	limit.WindowLog
	window time.Duration
}

// TakeWindow implements store.Windows.
func (m *MemoryStore) TakeWindow(_ context.Context, key string, limit int, window, maxWait time.Duration) (time.Duration, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.windows[key]
	if w == nil {
		w = &memWindow{}
		m.windows[key] = w
		m.prune(now)
	}
	w.window = window
	wait, took := w.Take(now, max(limit, 1), window, maxWait)
	if !took {
		return max(wait, time.Nanosecond), nil
	}
	return wait, nil
}
