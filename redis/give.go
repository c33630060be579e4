package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ratewise/ratewise/store"
	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"
)

var _ store.BucketCounter = (*Store)(nil)

// TakeCounted implements store.BucketCounter: Take, and the tokens the
// bucket holds after it on Redis's clock, in the one round trip.
func (s *Store) TakeCounted(ctx context.Context, key string, n int, r rate.Limit, burst int, maxWait time.Duration) (time.Duration, float64, error) {
	maxWait = max(maxWait, 0)
	type counted struct {
		wait   time.Duration
		tokens float64
	}
	c, err := call(s, ctx, func(ctx context.Context) (counted, error) {
		res, err := takeCountedScript.Run(ctx, s.rdb, []string{s.bucketKey(key)},
			1/float64(r), max(burst, 1), maxWait.Seconds(), max(n, 1)).StringSlice()
		if err != nil {
			return counted{}, err
		}
		if len(res) != 2 {
			return counted{}, fmt.Errorf("take script answered %d values, want 2", len(res))
		}
		secs, err1 := strconv.ParseFloat(res[0], 64)
		tokens, err2 := strconv.ParseFloat(res[1], 64)
		if err1 != nil || err2 != nil {
			return counted{}, fmt.Errorf("take script answered %q", res)
		}
		return counted{takenWait(secs, maxWait), tokens}, nil
	})
	return c.wait, c.tokens, err
}

// Give implements store.Buckets: the bucket's TAT moves back by n
// tokens, on Redis's clock; a bucket that is full again is deleted.
func (s *Store) Give(ctx context.Context, key string, n int, r rate.Limit, _ int) error {
	if n <= 0 {
		return nil
	}
	return s.do(ctx, func(ctx context.Context) error {
		return giveScript.Run(ctx, s.rdb, []string{s.bucketKey(key)}, 1/float64(r), n).Err()
	})
}

// takeCountedScript is takeScript that also answers the tokens the bucket
// holds once it has taken (or not): {wait, tokens}, both as strings, the
// wait negated when nothing was taken.
var takeCountedScript = goredis.NewScript(gcraTakeLua + `
local wait, tokens = take(` + takeArgsLua + `)
return {tostring(wait), tostring(tokens)}
`)

// giveScript gives tokens back to the bucket takeScript keeps: KEYS[1] its
// TAT; ARGV the seconds per token, the tokens. The TAT moves back that
// many intervals; one that is no longer ahead of now is a full bucket,
// whose key goes.
var giveScript = goredis.NewScript(`
redis.replicate_commands()
local interval, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local t = redis.call('TIME')
local now = (t[1] - 1483228800) + t[2] / 1000000
local newtat = tat - n * interval
if newtat <= now then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], newtat, 'PX', math.ceil((newtat - now) * 1000))
return 1
`)
