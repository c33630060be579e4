package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
)

// The store's side of ratewise.BreakerStore: each method runs one script.

func (s *Store) breakerKeys(key string) []string {
	return []string{s.key("breaker", key), s.key("breaker-failures", key), s.key("breaker-window", key)}
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
		window.Milliseconds(), s.opts.FailuresTTL.Milliseconds(), rules.Decay.Milliseconds(), rules.ProbeTimeout.Milliseconds()}
	for _, c := range rules.Cooldowns {
		args = append(args, c.Milliseconds())
	}
	return s.breaker(ctx, breakerFailedScript, key, args...)
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
	var sb ratewise.SharedBreaker
	err := s.do(ctx, func(ctx context.Context) error {
		v, err := script.Run(ctx, s.rdb, s.breakerKeys(key), args...).Int64Slice()
		if err != nil {
			return err
		}
		if len(v) != 5 {
			return fmt.Errorf("breaker script answered %d values, want 5", len(v))
		}
		sb = ratewise.SharedBreaker{Level: int(v[2]), Probe: v[3] == 1, Failures: int(v[4])}
		switch v[0] {
		case 1:
			sb.State = ratewise.BreakerHalfOpen
		case 2:
			sb.State = ratewise.BreakerOpen
		}
		if v[1] > 0 {
			sb.Until = time.UnixMilli(v[1])
		}
		return nil
	})
	return sb, err
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
