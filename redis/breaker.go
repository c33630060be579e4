package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
)

// The store's side of ratewise.BreakerStore: each method runs one script.

func (s *Store) breakerKeys(key string) []string {
	// The window's key is named apart from the counter an earlier version
	// kept there, so that a fleet being upgraded does not meet a key of
	// the wrong type.
	return []string{s.key("breaker", key), s.key("breaker-failures", key), s.key("breaker-recent", key)}
}

// BreakerAdmit implements ratewise.BreakerStore.
func (s *Store) BreakerAdmit(ctx context.Context, key string, rules *ratewise.BreakerRules) (ratewise.SharedBreaker, error) {
	return s.breaker(ctx, breakerAdmitScript, key, time.Now().UnixMilli(), rules.ProbeTimeout.Milliseconds())
}

// BreakerFailed implements ratewise.BreakerStore.
func (s *Store) BreakerFailed(ctx context.Context, key string, probe bool, rules *ratewise.BreakerRules) (ratewise.SharedBreaker, error) {
	window := rules.Window
	if window <= 0 {
		window = s.opts.FailuresTTL
	}
	args := []any{time.Now().UnixMilli(), flag(probe), rules.ConsecutiveFailures, rules.WindowFailures,
		window.Milliseconds(), s.opts.FailuresTTL.Milliseconds(), rules.Decay.Milliseconds(), rules.ProbeTimeout.Milliseconds(),
		rand.Uint64()}
	for _, c := range rules.Cooldowns {
		args = append(args, c.Milliseconds())
	}
	return s.breaker(ctx, breakerFailedScript, key, args...)
}

// BreakerReleaseProbe implements ratewise.BreakerStore.
func (s *Store) BreakerReleaseProbe(ctx context.Context, key string, probeID uint64) error {
	return s.do(ctx, func(ctx context.Context) error {
		return breakerReleaseScript.Run(ctx, s.rdb, s.breakerKeys(key)[:1], probeID).Err()
	})
}

// BreakerSucceeded implements ratewise.BreakerStore.
func (s *Store) BreakerSucceeded(ctx context.Context, key string, probe bool, _ *ratewise.BreakerRules) error {
	return s.do(ctx, func(ctx context.Context) error {
		return breakerSucceededScript.Run(ctx, s.rdb, s.breakerKeys(key), time.Now().UnixMilli(), flag(probe)).Err()
	})
}

// BreakerTripped implements ratewise.BreakerStore.
func (s *Store) BreakerTripped(ctx context.Context, key string, until time.Time, level int, rules *ratewise.BreakerRules) error {
	_, err := s.breaker(ctx, breakerTrippedScript, key, time.Now().UnixMilli(), until.UnixMilli(), level,
		rules.Decay.Milliseconds(), rules.ProbeTimeout.Milliseconds())
	return err
}

// breaker runs a breaker script and reads its answer.
func (s *Store) breaker(ctx context.Context, script *goredis.Script, key string, args ...any) (ratewise.SharedBreaker, error) {
	return call(s, ctx, func(ctx context.Context) (ratewise.SharedBreaker, error) {
		v, err := script.Run(ctx, s.rdb, s.breakerKeys(key), args...).Int64Slice()
		if err != nil {
			return ratewise.SharedBreaker{}, err
		}
		if len(v) != 5 && len(v) != 6 {
			return ratewise.SharedBreaker{}, fmt.Errorf("breaker script answered %d values, want 5 or 6", len(v))
		}
		sb := ratewise.SharedBreaker{Level: int(v[2]), Probe: v[3] == 1, Failures: int(v[4])}
		if len(v) == 6 {
			sb.ProbeID = uint64(v[5])
		}
		switch v[0] {
		case 1:
			sb.State = ratewise.BreakerHalfOpen
		case 2:
			sb.State = ratewise.BreakerOpen
		}
		if v[1] > 0 {
			sb.Until = time.UnixMilli(v[1])
		}
		return sb, nil
	})
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
