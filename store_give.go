package ratewise

import (
	"context"
	"time"

	"golang.org/x/time/rate"
)

// BucketCounter is a BucketStore that also says, as it takes, how many
// tokens the bucket holds once it has: what a server that publishes its
// quota in rate-limit headers needs for every answer, in the one call
// rather than a Take and a Tokens. The admission middleware uses it when
// its store has it, and calls Take then Tokens otherwise. MemoryStore and
// the ratewise/redis Store implement it.
type BucketCounter interface {
	BucketStore
	// TakeCounted is Take, and also returns the tokens key's bucket holds
	// after it, as Tokens would report them at that instant: less than 0
	// while tokens not yet come are reserved for waiters. When Take would
	// take nothing, it takes nothing either, and reports the tokens there
	// are.
	TakeCounted(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (wait time.Duration, tokens float64, err error)
}

var _ BucketCounter = (*MemoryStore)(nil)

// TakeCounted implements BucketCounter.
func (m *MemoryStore) TakeCounted(_ context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	wait, lim, burst := m.take(now, key, n, r, burst, maxWait)
	return wait, min(lim.TokensAt(now), float64(burst)), nil
}

// Give implements BucketStore.
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
