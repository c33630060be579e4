package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/store"
)

// This file is the store's store.Windows: a told window's starts, the
// fleet's, in a sorted set scored by when each start goes.

var _ store.Windows = (*Store)(nil)

// windowLua takes a start of a window: window(key, limit, window, margin,
// maxwait), times in seconds since 2017 on Redis's clock. The starts that
// left the window (their time, the window and the margin ago) go; when
// limit are left, the next goes when the oldest of the last limit leaves
// it, and never before the latest taken (reserved turns keep their
// order). A start within maxwait is added and its wait returned; one
// beyond it is not, and its wait is returned negated. The key expires
// once its last start left the window.
const windowLua = `
local function takeWindow(key, limit, window, margin, maxwait)
  local t = redis.call('TIME')
  local now = (t[1] - 1483228800) + t[2] / 1000000
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.6f', now - window - margin))
  local n = redis.call('ZCARD', key)
  local start = now
  if n >= limit then
    local freed = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
    start = tonumber(freed[2]) + window + margin
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #last == 2 and tonumber(last[2]) > start then
    start = tonumber(last[2])
  end
  local wait = start - now
  if wait > maxwait then
    return tostring(-math.max(wait, 1e-9))
  end
  redis.call('ZADD', key, string.format('%.6f', start),
    string.format('%.6f:%d:%d:%d', start, t[1], t[2], n))
  redis.call('PEXPIRE', key, math.ceil((start - now + window + margin) * 1000) + 1)
  return tostring(wait)
end
`

// windowScript: KEYS[1] the window's set; ARGV its limit, its length and
// margin in seconds, the most the caller may wait in seconds.
var windowScript = goredis.NewScript(`
redis.replicate_commands()
` + windowLua + `
return takeWindow(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
`)

// TakeWindow implements store.Windows with one script, on Redis's clock,
// the starts of a window's key in a sorted set.
func (s *Store) TakeWindow(ctx context.Context, key string, n int, window, maxWait time.Duration) (time.Duration, error) {
	maxWait = max(maxWait, 0)
	return call(s, ctx, func(ctx context.Context) (time.Duration, error) {
		secs, err := windowScript.Run(ctx, s.rdb, []string{s.key("window", key)},
			max(n, 1), window.Seconds(), limit.WindowMargin.Seconds(), maxWait.Seconds()).Float64()
		if err != nil {
			return 0, err
		}
		return takenWait(secs, maxWait), nil
	})
}
