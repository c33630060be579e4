package ratewise

import "time"

// This file holds ready configurations: three presets of the whole stack
// for APIs whose limits are unknown. The published limits of named APIs
// are in package providers.
//
// The presets, side by side:
//
//	                     Conservative        Moderate            Aggressive
//	MaxAttempts          3                   5 (the default)     8
//	InitialDelay         2s                  1s                  250ms
//	MaxDelay             1m                  30s                 10s
//	TotalWaitCap         5m                  2m                  1m
//	retry budget         10% + 2/s           20% + 10/s          50% + 20/s
//	limit                learned (the        learned             learned
//	                     default), 4 in flight
//	breaker trips after  3 failures          5 failures          10 failures
//	breaker cooldown     2m, then 10m, 1h    1m                  15s
//
// A breaker's failures are rate-limit events (a burst of 429s is one),
// 5xx and network errors.

// Preset is a configuration of the whole stack: a retry policy, limit
// scopes and a breaker. Give it to [New] with [WithPreset]; options after it
// add to it or replace its parts (a later WithRetry wins). Every preset
// learns each host's limit, as New does, and no preset's breaker opens on a
// server that only limits its rate (see "Breakers" in the package doc).
type Preset struct {
	Name    string
	Retry   RetryPolicy
	Limits  []Limit
	Breaker *BreakerPolicy // nil: no breaker
}

// WithPreset applies p: its retry policy, each of its limits, and its
// breaker.
func WithPreset(p Preset) Option {
	return func(t *Transport) {
		WithRetry(p.Retry)(t)
		for _, l := range p.Limits {
			WithLimit(l)(t)
		}
		if p.Breaker != nil {
			WithBreaker(*p.Breaker)(t)
		}
	}
}

// Conservative is for an API that must not be annoyed, or a background
// job with time to spare: few attempts, long waits, a small retry budget,
// at most four requests in flight per host, and a breaker that trips
// early and stays open longer each time its probe fails.
func Conservative() Preset {
	return Preset{
		Name: "conservative",
		Retry: RetryPolicy{MaxAttempts: 3, InitialDelay: 2 * time.Second, MaxDelay: time.Minute,
			TotalWaitCap: 5 * time.Minute, RetryBudget: 0.1, RetryBudgetFloor: 2},
		Limits: []Limit{{Name: "in flight", MaxConcurrent: 4}},
		Breaker: &BreakerPolicy{ConsecutiveFailures: 3, Cooldown: 2 * time.Minute,
			Escalation: []time.Duration{10 * time.Minute, time.Hour}},
	}
}

// Moderate is the default policy, the learned pace and the default
// breaker: the preset to start from for an API whose limits you do not
// know.
func Moderate() Preset {
	return Preset{
		Name:    "moderate",
		Retry:   DefaultRetryPolicy(),
		Breaker: &BreakerPolicy{},
	}
}

// Aggressive is for a user waiting on the answer of an API that recovers
// fast: more attempts, short waits, a large retry budget, the learned pace
// and a breaker that trips late and tries again soon.
func Aggressive() Preset {
	return Preset{
		Name: "aggressive",
		Retry: RetryPolicy{MaxAttempts: 8, InitialDelay: 250 * time.Millisecond, MaxDelay: 10 * time.Second,
			TotalWaitCap: time.Minute, RetryBudget: 0.5, RetryBudgetFloor: 20},
		Breaker: &BreakerPolicy{ConsecutiveFailures: 10, Cooldown: 15 * time.Second},
	}
}
