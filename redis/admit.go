package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ratewise/ratewise/store"
	goredis "github.com/redis/go-redis/v9"
)

// This file is the store's store.Admitter side: an attempt's
// breaker, pause and bucket asked in one script, one round trip.

var _ store.Admitter = (*Store)(nil)

// Admit implements store.Admitter with one script. A Redis Cluster or a
// Ring keeps each key's state in the slot of its key (see key): the
// questions of one attempt whose names share their key (a host's pause,
// breaker and scopes, by default) are asked together there too; those of
// several keys (a Global scope's, say) get store.ErrCannotCombine, and
// the transport asks them one by one.
func (s *Store) Admit(ctx context.Context, ask *store.AdmitAsk) (store.AdmitAnswer, error) {
	slot, ok := oneSlot(ask)
	if _, single := s.rdb.(*goredis.Client); !single && !ok {
		return store.AdmitAnswer{}, store.ErrCannotCombine
	}
	keys := make([]string, 5)
	var probeTimeout int64
	if ask.Breaker != "" {
		bk := s.breakerKeys(ask.Breaker)
		keys[0], keys[1] = bk[0], bk[1]
		probeTimeout = ask.Rules.ProbeTimeout.Milliseconds()
	}
	if ask.Pause != "" {
		keys[2] = s.key("pause", ask.Pause)
	}
	var interval float64
	if ask.Bucket != "" {
		keys[3] = s.bucketKey(ask.Bucket)
		interval = 1 / float64(ask.Rate)
	}
	if ask.Learned != "" {
		keys[4] = s.learnedKey(ask.Learned)
	}
	for i, k := range keys {
		if k == "" {
			keys[i] = s.key("unasked", slot) // in the slot of the rest, never read
		}
	}
	now := time.Now()
	args := append(make([]any, 0, 16), now.UnixMilli(), probeTimeout,
		flag(ask.Breaker != ""), flag(ask.Pause != ""), flag(ask.Bucket != ""), flag(ask.Learned != ""),
		interval, max(ask.Burst, 1), max(ask.N, 1), ask.Succeeded)
	if ask.Learned != "" {
		args = append(args, learnArgs(&ask.Learn, 0)...)
	}
	return call(s, ctx, func(ctx context.Context) (store.AdmitAnswer, error) {
		v, err := admitScript.Run(ctx, s.rdb, keys, args...).Slice()
		if err != nil {
			return store.AdmitAnswer{}, err
		}
		return readAdmit(v)
	})
}

// oneSlot returns the key all of ask's names share, which a cluster
// hashes (slotKey), and whether they share one, not empty.
func oneSlot(ask *store.AdmitAsk) (string, bool) {
	slot := ""
	for _, name := range []string{ask.Breaker, ask.Pause, ask.Bucket, ask.Learned} {
		if name == "" {
			continue
		}
		k := slotKey(name)
		if k == "" || slot != "" && k != slot {
			return "", false
		}
		slot = k
	}
	return slot, slot != ""
}

// readAdmit reads admitScript's answer: the breaker's values, the pause's
// end and the take's wait.
func readAdmit(v []any) (store.AdmitAnswer, error) {
	var a store.AdmitAnswer
	if len(v) != 4 {
		return a, fmt.Errorf("admit script answered %d values, want 4", len(v))
	}
	if breaker, _ := v[0].([]any); len(breaker) != 0 {
		var buf [7]int64
		n := buf[:0]
		for i, x := range breaker {
			num, err := toInt64(x)
			if err != nil {
				return a, fmt.Errorf("admit script answered %v for the breaker at %d: %w", x, i, err)
			}
			n = append(n, num)
		}
		var err error
		if a.Breaker, err = breakerAnswer(n); err != nil {
			return a, err
		}
	}
	paused, err := toInt64(v[1])
	if err != nil {
		return a, fmt.Errorf("admit script answered %v for the pause: %w", v[1], err)
	}
	if paused > 0 {
		a.PausedUntil = time.UnixMilli(paused)
	}
	if wait, _ := v[2].(string); wait != "" {
		secs, err := strconv.ParseFloat(wait, 64)
		if err != nil {
			return a, fmt.Errorf("admit script answered %q for the take: %w", wait, err)
		}
		a.Took, a.Wait = true, takenWait(secs, 0) // taken only when there now
	}
	if learned, _ := v[3].([]any); len(learned) != 0 {
		if a.Learned, err = readLearn(learned); err != nil {
			return a, err
		}
		a.Learnt = true
	}
	return a, nil
}
