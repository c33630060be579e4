package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise/store"
)

// The store's side of store.Breakers: each method runs one script.

func (s *Store) breakerKeys(key string) []string {
	// The window's key is named apart from the counter an earlier version
	// kept there, so that a fleet being upgraded does not meet a key of
	// the wrong type.
	return []string{s.key("breaker", key), s.key("breaker-failures", key), s.key("breaker-recent", key)}
}

// BreakerAdmit implements store.Breakers.
func (s *Store) BreakerAdmit(ctx context.Context, key string, rules *store.Rules) (store.Breaker, error) {
	return s.breaker(ctx, breakerAdmitScript, key, time.Now().UnixMilli(), rules.ProbeTimeout.Milliseconds())
}

// BreakerRead implements store.Breakers.
func (s *Store) BreakerRead(ctx context.Context, key string, rules *store.Rules) (store.Breaker, error) {
	return call(s, ctx, func(ctx context.Context) (store.Breaker, error) {
		v, err := breakerReadScript.Run(ctx, s.rdb, s.breakerKeys(key), time.Now().UnixMilli(), rules.Decay.Milliseconds()).Slice()
		if err != nil {
			return store.Breaker{}, err
		}
		if len(v) != 8 {
			return store.Breaker{}, fmt.Errorf("breaker read script answered %d values, want 8", len(v))
		}
		var n [7]int64
		for i := range n {
			if n[i], err = toInt64(v[i]); err != nil {
				return store.Breaker{}, fmt.Errorf("breaker read script answered %v at %d: %w", v[i], i, err)
			}
		}
		sb := sharedBreaker(n[0], n[1], n[2])
		sb.Failures = int(n[3])
		if n[4] > 0 {
			sb.OpenedAt = time.UnixMilli(n[4])
		}
		detail, _ := v[7].(string)
		sb.Cause = store.Cause{StatusCode: int(n[5]), Class: uint8(n[6]), Detail: detail}
		return sb, nil
	})
}

func toInt64(v any) (int64, error) {
	if n, ok := v.(int64); ok {
		return n, nil
	}
	return 0, fmt.Errorf("not an integer")
}

// BreakerFailed implements store.Breakers.
func (s *Store) BreakerFailed(ctx context.Context, key string, probe bool, cause store.Cause, rules *store.Rules) (store.Breaker, error) {
	window := rules.Window
	if window <= 0 {
		window = s.opts.FailuresTTL
	}
	args := []any{time.Now().UnixMilli(), flag(probe), rules.ConsecutiveFailures, rules.WindowFailures,
		window.Milliseconds(), s.opts.FailuresTTL.Milliseconds(), rules.Decay.Milliseconds(), rules.ProbeTimeout.Milliseconds(),
		rand.Uint64(), rules.RetripWindow.Milliseconds(), cause.StatusCode, int(cause.Class), cause.Detail}
	for _, c := range rules.Cooldowns {
		args = append(args, c.Milliseconds())
	}
	return s.breaker(ctx, breakerFailedScript, key, args...)
}

// BreakerReleaseProbe implements store.Breakers.
func (s *Store) BreakerReleaseProbe(ctx context.Context, key string, probeID uint64) error {
	return s.do(ctx, func(ctx context.Context) error {
		return breakerReleaseScript.Run(ctx, s.rdb, s.breakerKeys(key)[:1], probeID).Err()
	})
}

// BreakerSucceeded implements store.Breakers.
func (s *Store) BreakerSucceeded(ctx context.Context, key string, probe bool, rules *store.Rules) error {
	return s.do(ctx, func(ctx context.Context) error {
		return breakerSucceededScript.Run(ctx, s.rdb, s.breakerKeys(key), time.Now().UnixMilli(), flag(probe),
			rules.RetripWindow.Milliseconds()).Err()
	})
}

// BreakerTripped implements store.Breakers.
func (s *Store) BreakerTripped(ctx context.Context, key string, trip store.Trip, rules *store.Rules) error {
	var openedAt int64
	if !trip.OpenedAt.IsZero() {
		openedAt = trip.OpenedAt.UnixMilli()
	}
	_, err := s.breaker(ctx, breakerTrippedScript, key, time.Now().UnixMilli(), trip.Until.UnixMilli(), trip.Level,
		rules.Decay.Milliseconds(), rules.ProbeTimeout.Milliseconds(), openedAt,
		trip.Cause.StatusCode, int(trip.Cause.Class), trip.Cause.Detail)
	return err
}

// breaker runs a breaker script and reads its answer.
func (s *Store) breaker(ctx context.Context, script *goredis.Script, key string, args ...any) (store.Breaker, error) {
	return call(s, ctx, func(ctx context.Context) (store.Breaker, error) {
		v, err := script.Run(ctx, s.rdb, s.breakerKeys(key), args...).Int64Slice()
		if err != nil {
			return store.Breaker{}, err
		}
		return breakerAnswer(v)
	})
}

// breakerAnswer reads what a breaker script answers: {state, until,
// level, probe, failures}, then the probe's name when one was granted,
// then, from an admission, the failures counted ever.
func breakerAnswer(v []int64) (store.Breaker, error) {
	if len(v) < 5 || len(v) > 7 {
		return store.Breaker{}, fmt.Errorf("breaker script answered %d values, want 5 to 7", len(v))
	}
	sb := sharedBreaker(v[0], v[1], v[2])
	sb.Probe, sb.Failures = v[3] == 1, int(v[4])
	if len(v) >= 6 {
		sb.ProbeID = uint64(v[5])
	}
	if len(v) == 7 {
		sb.Gen = uint64(max(v[6], 0))
	}
	return sb, nil
}

// sharedBreaker reads the state, the end of the cooldown and the level
// that the scripts answer first.
func sharedBreaker(state, until, level int64) store.Breaker {
	sb := store.Breaker{Level: int(level)}
	switch state {
	case 1:
		sb.State = store.HalfOpen
	case 2:
		sb.State = store.Open
	}
	if until > 0 {
		sb.Until = time.UnixMilli(until)
	}
	return sb
}

func flag(b bool) int {
	if b {
		return 1
	}
	return 0
}
