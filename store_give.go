package ratewise

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

var _ store.BucketCounter = (*MemoryStore)(nil)

// TakeCounted implements store.BucketCounter.
func (m *MemoryStore) TakeCounted(_ context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	wait, lim, burst := m.take(now, key, n, r, burst, maxWait)
	return wait, min(lim.TokensAt(now), float64(burst)), nil
}

// Give implements store.Buckets.
func (m *MemoryStore) Give(_ context.Context, key string, n int, _ rate.Limit, _ int) error {
	if n <= 0 {
		return nil
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if lim := m.buckets[key]; lim != nil {
		// A negative n adds tokens: the limiter takes n from what it holds
		// now, and caps what it holds at its burst whenever it reads it.
		lim.AllowN(now, -n)
	}
	return nil
}
