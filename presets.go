package ratewise

import (
	"time"

	"golang.org/x/time/rate"
)

// This file holds ready configurations: three presets of the whole stack
// for APIs whose limits are unknown, and the published limits of a few
// well-known APIs.
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
// scopes and a breaker. Give it to [New] with [WithPreset]; options after
// it add to it or replace its parts (a later WithRetry wins). Every preset
// learns each host's limit, as [New] does by default: none paces a host
// that the server has not yet refused or counted. No preset's breaker
// opens on a server that only limits its rate: a breaker counts a burst
// of refusals once, and a refusal within the wait the last one asked for
// not at all (see [BreakerPolicy]), while the pace and the cooldown gate
// answer them; a call that finds its breaker half-open waits for the
// probe's outcome within its wait budget.
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

// perWindow is a bucket that never lets more than n requests start in any
// window of w: a burst of b, an eighth of n, and n − b more spread over
// the window. Its sustained rate is 7/8 of n per w, the price of never
// going over.
func perWindow(name string, n int, w time.Duration) Limit {
	b := max(n/8, 1)
	return Limit{Name: name, Rate: rate.Limit(float64(n-b) / w.Seconds()), Burst: b}
}

// TMDBLimit is The Movie Database's published limit, 40 requests every 10
// seconds per IP address, as a bucket that never lets more through in any
// 10 seconds. https://developer.themoviedb.org/docs/rate-limiting (TMDB
// has since relaxed it to about 50 a second; 40 per 10 s stays safe).
func TMDBLimit() Limit { return perWindow("tmdb", 40, 10*time.Second) }

// MusicBrainzLimit is MusicBrainz's limit: one request a second per IP
// address, no burst; going over it may get the address blocked. The
// service also asks every client to send a meaningful User-Agent.
// https://musicbrainz.org/doc/MusicBrainz_API/Rate_Limiting
func MusicBrainzLimit() Limit {
	return Limit{Name: "musicbrainz", Rate: 1, Burst: 1}
}

// FanartLimit is FanArt.tv's limit for a project API key, 10 requests a
// second, or 20 with a user's personal key, which lifts the limits of the
// project's. https://fanart.tv/api-docs/ and
// https://fanart.tv/get-an-api-key/
func FanartLimit(personalKey bool) Limit {
	if personalKey {
		return perWindow("fanart", 20, time.Second)
	}
	return perWindow("fanart", 10, time.Second)
}

// TheAudioDBLimit is TheAudioDB's free-tier limit: 30 requests a minute.
// https://www.theaudiodb.com/free_music_api
func TheAudioDBLimit() Limit { return perWindow("theaudiodb", 30, time.Minute) }

// GitHubLimit is the GitHub REST API's primary limit for an authenticated
// client: 5,000 requests an hour, with at most 100 in flight. GitHub
// counts the quota in X-RateLimit-* headers, so the limit is adaptive: it
// sends what the hour has left and then waits for its reset, never faster
// than its ceiling of 5,000 an hour.
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
func GitHubLimit() Limit {
	return Limit{Name: "github", Adaptive: true, Rate: rate.Every(time.Hour / 5000), MaxConcurrent: 100}
}
