package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/store"
)

// This file is the store's store.Learned: a fleet's learned pace, one
// hash per key, learned and taken from by one script (learnScript).

var _ store.Learned = (*Store)(nil)

// learnedLifetime is how long a key's learned state outlives its last
// turn: as long as a transport keeps an idle key's.
const learnedLifetime = ratewise.DefaultIdleTimeout

// Learn implements store.Learned with one script, on Redis's clock.
func (s *Store) Learn(ctx context.Context, key string, ask *store.LearnAsk) (store.LearnAnswer, error) {
	return s.learnAt(ctx, key, ask, 0)
}

// learnAt is Learn at now, in seconds since an epoch of the caller's,
// the same for every call on key; 0 is Redis's clock.
func (s *Store) learnAt(ctx context.Context, key string, ask *store.LearnAsk, now float64) (store.LearnAnswer, error) {
	args := learnArgs(ask, now)
	return call(s, ctx, func(ctx context.Context) (store.LearnAnswer, error) {
		v, err := learnScript.Run(ctx, s.rdb, []string{s.learnedKey(key)}, args...).Slice()
		if err != nil {
			return store.LearnAnswer{}, err
		}
		return readLearn(v)
	})
}

// learnedKey is the Redis key of key's learned state.
func (s *Store) learnedKey(key string) string { return s.key("learned", key) }

// learnArgs are learnScript's ARGV for ask at now (0: Redis's clock).
func learnArgs(ask *store.LearnAsk, now float64) []any {
	args := make([]any, 0, 6+9*len(ask.Outcomes))
	args = append(args, now, flag(ask.Take), max(ask.MaxWait, 0).Seconds(), max(ask.Ceiling, 0),
		learnedLifetime.Milliseconds(), len(ask.Outcomes))
	for _, o := range ask.Outcomes {
		args = append(args, o.Seq, int(o.Kind), max(o.Hint, 0).Seconds(), o.Passed,
			flag(o.Counted), o.Remaining, o.Limit, max(o.Reset, 0).Seconds(), flag(o.ResetDue))
	}
	return args
}

// readLearn reads learnScript's answer.
func readLearn(v []any) (store.LearnAnswer, error) {
	var a store.LearnAnswer
	if len(v) != 13 {
		return a, fmt.Errorf("learn script answered %d values, want 13", len(v))
	}
	var ints [8]int64
	for i, at := range []int{0, 1, 3, 5, 6, 7, 10, 12} {
		n, err := toInt64(v[at])
		if err != nil {
			return a, fmt.Errorf("learn script answered %v at %d: %w", v[at], at, err)
		}
		ints[i] = n
	}
	var quota int64
	var err error
	if quota, err = toInt64(v[8]); err != nil {
		return a, fmt.Errorf("learn script answered %v for the quota: %w", v[8], err)
	}
	var floats [4]float64
	for i, at := range []int{2, 4, 9, 11} {
		str, _ := v[at].(string)
		if floats[i], err = strconv.ParseFloat(str, 64); err != nil {
			return a, fmt.Errorf("learn script answered %v at %d: %w", v[at], at, err)
		}
	}
	a.Paced, a.Took, a.Tell, a.HintsOverstate = ints[0] == 1, ints[1] == 1, ints[3] == 1, ints[4] == 1
	a.Seq = uint64(max(ints[2], 0))
	a.Wait, a.Rate = seconds(floats[0]), floats[1]
	a.State = store.LearnedState{Windowed: ints[5] == 1, Quota: int(quota), Blind: ints[6] == 1, Rate: floats[3],
		Counted: ints[7] == 1}
	if held := seconds(floats[2]); held > 0 {
		a.State.HeldUntil = time.Now().Add(held)
	}
	return a, nil
}

// seconds is secs as a duration, none below 0.
func seconds(secs float64) time.Duration {
	return time.Duration(max(secs, 0) * float64(time.Second))
}
