package ratewise

import (
	"context"
	"encoding/json"
	"github.com/ratewise/ratewise/store"
	"math"
	"time"
)

// KeyStatus is a snapshot of what holds a key back: its pause, each
// limit scope's state and its breaker. It marshals to JSON with durations
// in seconds, for get_throttle_stats-style tools.
type KeyStatus struct {
	Key string `json:"key"`
	// PausedFor is what is left of the key's pause.
	PausedFor time.Duration `json:"-"`
	Scopes    []ScopeStatus `json:"scopes,omitempty"`
	// Breaker is nil when the transport has no breakers.
	Breaker *BreakerStatus `json:"breaker,omitempty"`
}

// ScopeStatus is one limit scope's state for a key.
type ScopeStatus struct {
	Name string `json:"name"`
	// Key is the key the scope keeps the state under ("" for Global).
	Key string `json:"key"`
	// Tokens, Rate (per second) and Burst describe the token bucket; all
	// zero when the scope has none, is unlimited (rate.Inf) or Adaptive.
	// With a Window, Burst is what one window admits and Tokens how many
	// more may start now. With a Store, Tokens is what the shared bucket
	// holds (store.Buckets.Tokens), or this transport's bucket when the
	// store fails.
	Tokens   float64       `json:"tokens"`
	Rate     float64       `json:"rate_per_second"`
	Burst    int           `json:"burst"`
	Window   time.Duration `json:"-"`
	InFlight int           `json:"in_flight"`
	Waiting  int           `json:"waiting"`
	// Adaptive is set for an Adaptive scope. LearnedRate is then the pace
	// it keeps for the key, in requests a second: learned from refusals,
	// or, when the server counts its quota (Counted), the refill it surely
	// gives; 0 while the key sends unpaced. QuotaRemaining is the server's
	// last count, when Counted. Windowed is set when the key takes its
	// server for a fixed window, learned from refusals: WindowQuota is what
	// the last window let through, and HeldFor how long until the window
	// reopens, 0 while it is open. InFlightCap is the cap on the key's
	// requests in flight the server showed, which the key is held to
	// rather than paced, 0 for none; Blind is set while the key goes
	// unpaced because its refusals proved blind to its pace, a server
	// shedding load rather than limiting a rate. Through WithStore, they
	// are what the fleet learned, as its store keeps it.
	Adaptive       bool          `json:"adaptive,omitempty"`
	InFlightCap    int           `json:"in_flight_cap,omitempty"`
	Blind          bool          `json:"blind,omitempty"`
	LearnedRate    float64       `json:"learned_rate_per_second,omitempty"`
	Counted        bool          `json:"counted,omitempty"`
	QuotaRemaining int           `json:"quota_remaining"`
	Windowed       bool          `json:"windowed,omitempty"`
	WindowQuota    int           `json:"window_quota,omitempty"`
	HeldFor        time.Duration `json:"-"`
}

// MarshalJSON writes the status with Window and HeldFor in seconds.
func (s ScopeStatus) MarshalJSON() ([]byte, error) {
	type plain ScopeStatus
	return json.Marshal(struct {
		plain
		Window  float64 `json:"window_seconds,omitempty"`
		HeldFor float64 `json:"held_for_seconds,omitempty"`
	}{plain(s), s.Window.Seconds(), s.HeldFor.Seconds()})
}

// BreakerStatus is a key's breaker state.
type BreakerStatus struct {
	// Key is the breaker's key (a host, by default).
	Key   string       `json:"key,omitempty"`
	State BreakerState `json:"state"`
	// ResetIn is the time left before an open breaker lets a probe through.
	ResetIn time.Duration `json:"-"`
	// Level is the escalation level: 0 for Cooldown, i for Escalation[i-1].
	Level int `json:"level"`
	// Requests, Failures and ConsecutiveFailures are gobreaker's counts
	// since its last change of state. While a breaker is closed and has
	// seen no failure, successes skip gobreaker and are not counted.
	Requests            uint32 `json:"requests"`
	Failures            uint32 `json:"failures"`
	ConsecutiveFailures uint32 `json:"consecutive_failures"`
	// OpenedAt is when the breaker last opened (a trip, or a failed
	// probe), and Cause what opened it; zero when it never did as far as
	// the transport, or the policy's Store, remembers. They stay once it
	// closes, until the breaker is forgotten.
	OpenedAt time.Time    `json:"-"`
	Cause    BreakerCause `json:"-"`
}

// MarshalJSON writes the status with PausedFor in seconds.
func (s KeyStatus) MarshalJSON() ([]byte, error) {
	type plain KeyStatus
	return json.Marshal(struct {
		plain
		PausedFor float64 `json:"paused_for_seconds"`
	}{plain(s), s.PausedFor.Seconds()})
}

// MarshalJSON writes the status with ResetIn in seconds, and, once the
// breaker has opened, opened_at (RFC 3339) and cause.
func (s BreakerStatus) MarshalJSON() ([]byte, error) {
	type plain BreakerStatus
	out := struct {
		plain
		ResetIn  float64       `json:"reset_in_seconds"`
		OpenedAt *time.Time    `json:"opened_at,omitempty"`
		Cause    *BreakerCause `json:"cause,omitempty"`
	}{plain: plain(s), ResetIn: s.ResetIn.Seconds()}
	if !s.OpenedAt.IsZero() {
		out.OpenedAt, out.Cause = &s.OpenedAt, &s.Cause
	}
	return json.Marshal(out)
}

// KeyStatus reports the state kept for key (a host, by default): the
// pause, each limit scope's bucket and slots, and the breaker; a scope
// keyed by Global reports its one state. A key with no state reports an
// idle one, and none is created. What a store shares, KeyStatus asks it,
// one call each: a failing store leaves what this transport knows, but a
// breaker's store failing closed reports the breaker open.
func (t *Transport) KeyStatus(key string) KeyStatus {
	now := time.Now()
	st := KeyStatus{Key: key}
	if t.gate != nil {
		st.PausedFor = t.gate.PausedForShared(key, now)
	}
	for _, s := range t.scopes() {
		st.Scopes = append(st.Scopes, s.status(key, now, t.shared.Learned))
	}
	if t.breakers != nil {
		b := t.breakers.status(key, now)
		st.Breaker = &b
	}
	return st
}

// Blocking reports whether requests to key are held back right now, by an
// open breaker or a server's cooldown, and for how long: a batch job can
// stop early instead of failing item by item. With a Store, a pause or a
// breaker another transport set counts (see KeyStatus).
func (t *Transport) Blocking(key string) (bool, time.Duration) {
	now := time.Now()
	var wait time.Duration
	if t.gate != nil {
		wait = t.gate.PausedForShared(key, now)
	}
	if t.breakers != nil {
		b := t.breakers.status(key, now)
		if b.State != BreakerClosed {
			return true, max(wait, b.ResetIn)
		}
	}
	return wait > 0, wait
}

func (s *scope) status(key string, now time.Time, learned store.Learned) ScopeStatus {
	if s.Global() {
		key = ""
	}
	l := s.limit()
	out := s.localStatus(key, now, l)
	if s.Adaptive() && learned != nil {
		// What the fleet learned, rather than this transport, which
		// learns by itself only while the store fails.
		if a, err := learned.Learn(context.Background(), s.StoreKey(key), &store.LearnAsk{}); err == nil {
			sharedStatus(&out, a.State, now)
			// A trial this transport ran (see internal/scopes) holds the
			// key blind here alone: the store was told nothing.
			out.Blind = out.Blind || !a.Paced && s.TrialBlind(key, now)
		}
	}
	if l.Store != nil && finiteRate(l.Rate) {
		// The shared bucket, rather than this transport's, which stands
		// in only while the store fails.
		if tokens, err := l.Store.Tokens(context.Background(), s.StoreKey(key), l.Rate, l.Burst); err == nil {
			out.Tokens = math.Max(tokens, 0)
		}
	}
	return out
}

// sharedStatus puts in out what the fleet learned of its key, as the
// store reports it.
func sharedStatus(out *ScopeStatus, st store.LearnedState, now time.Time) {
	out.LearnedRate, out.Blind, out.Counted = st.Rate, st.Blind, st.Counted
	out.Windowed, out.WindowQuota, out.HeldFor = st.Windowed, st.Quota, 0
	if st.HeldUntil.After(now) {
		out.HeldFor = st.HeldUntil.Sub(now)
	}
}

// localStatus is the status of key's state in this transport.
func (s *scope) localStatus(key string, now time.Time, l *Limit) ScopeStatus {
	out := ScopeStatus{Name: s.Name(), Key: key, Adaptive: s.Adaptive()}
	if finiteRate(l.Rate) && !s.Adaptive() || l.Window > 0 {
		out.Rate, out.Burst, out.Tokens = float64(l.Rate), l.Burst, float64(l.Burst)
		out.Window = l.Window
	}
	look, ok := s.Look(key, now)
	if !ok {
		return out
	}
	snap := look.Told
	if snap.HasTokens && (out.Rate != 0 || l.Window > 0) {
		out.Tokens = snap.Tokens
	}
	out.InFlight, out.Waiting = snap.InFlight, snap.Waiting
	if look.Learned {
		learned := look.Pace
		out.InFlight = max(out.InFlight, learned.InFlight)
		out.Waiting = max(out.Waiting, learned.Queued)
		if !math.IsInf(learned.Rate, 1) {
			out.LearnedRate = learned.Rate
		}
		out.InFlightCap, out.Blind = learned.FlightCap, learned.Blind
		if learned.Counted {
			out.Counted, out.QuotaRemaining = true, learned.Remaining
			if learned.Refill > 0 && out.LearnedRate == 0 {
				out.LearnedRate = learned.Refill
			}
		}
		if learned.Windowed {
			out.Windowed, out.WindowQuota, out.HeldFor = true, learned.Quota, learned.HeldFor
		}
	}
	return out
}

// BreakerStatuses reports the breaker of every key the transport holds
// one for, in no order; nil without WithBreaker. Idle closed breakers are
// evicted in time, so the list stays bounded.
func (t *Transport) BreakerStatuses() []BreakerStatus {
	if t.breakers == nil {
		return nil
	}
	now := time.Now()
	keys := t.breakers.Keys()
	out := make([]BreakerStatus, 0, len(keys))
	for _, key := range keys {
		out = append(out, t.breakers.status(key, now))
	}
	return out
}

// status is key's breaker: this transport's, and the one its store
// shares, whichever holds requests back longer.
func (b *breakers) status(key string, now time.Time) BreakerStatus {
	st := b.Status(key, now)
	return BreakerStatus{Key: key, State: BreakerState(st.State), ResetIn: st.ResetIn, Level: st.Level,
		Requests: st.Requests, Failures: st.Failures, ConsecutiveFailures: st.ConsecutiveFailures,
		OpenedAt: st.OpenedAt, Cause: causeFromStore(st.Cause)}
}
