package store

import (
	"context"
	"time"
)

// Windows keeps the starts of told windows (a Limit of Burst per Window),
// shared by every transport given the same store: at most limit requests
// of a key start in any window, however many transports send them. Each
// call is atomic. ratewise.MemoryStore is the reference of what it does.
type Windows interface {
	// TakeWindow takes key's next start in a window of limit starts per
	// window, and returns 0 when it may go now. Otherwise, when the start
	// comes within maxWait (the oldest start leaving the window, and a
	// margin), it is reserved and TakeWindow returns how long until it:
	// the caller waits that long and goes without asking again. When it
	// does not, it takes nothing and returns how long until it would come.
	TakeWindow(ctx context.Context, key string, limit int, window, maxWait time.Duration) (time.Duration, error)
}
