package breaker

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
)

// config is a breaker that trips on 2 failures in a row, open 10s, then
// 60s, then 5m, decaying a level each hour.
func config(notify func(Change)) Config {
	return Config{HalfOpenProbes: 1, SuccessesToClose: 1, Notify: notify,
		Rules: store.Rules{ConsecutiveFailures: 2, Window: time.Minute, Decay: time.Hour, ProbeTimeout: 30 * time.Second,
			Cooldowns: []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute}, RetripWindow: time.Hour}}
}

// attempt admits one attempt for key at once, tells it r, and returns the
// verdict it met.
func attempt(t *testing.T, b *Breakers, key string, r Result) Verdict {
	t.Helper()
	e := b.Acquire(key)
	tk, v := tryLocal(b, key, e)
	if !v.Go {
		b.Release(e)
		return v
	}
	tk.Sent()
	tk.Outcome(context.Background(), r, store.Cause{StatusCode: 503})
	return v
}

func TestTripsProbesAndEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := New(config(func(c Change) { changes = append(changes, c.From.String()+">"+c.To.String()) }), nil, time.Minute)
		for range 2 {
			if v := attempt(t, b, "k", Failure); !v.Go {
				t.Fatalf("an attempt before the trip met %+v", v)
			}
		}
		if v := attempt(t, b, "k", Success); v.OpenFor != 10*time.Second || v.Failures != 2 {
			t.Fatalf("after 2 failures: %+v, want open for 10s after 2 failures", v)
		}
		time.Sleep(10 * time.Second)
		// Half-open: the probe goes, a second attempt waits for it.
		e := b.Acquire("k")
		probe, v := tryLocal(b, "k", e)
		if !v.Go || !probe.Probe() {
			t.Fatalf("after the cooldown: %+v, probe %v; want the probe", v, probe.Probe())
		}
		probe.Sent()
		e2 := b.Acquire("k")
		if _, v := tryLocal(b, "k", e2); v.Woken == nil {
			t.Fatalf("beside the probe: %+v, want to wait for it", v)
		}
		b.Release(e2)
		probe.Outcome(context.Background(), Failure, store.Cause{StatusCode: 503})
		// A failed probe opens it one level up: 60s.
		if v := attempt(t, b, "k", Success); v.OpenFor != time.Minute {
			t.Fatalf("after a failed probe: %+v, want open for 1m", v)
		}
		time.Sleep(time.Minute)
		if v := attempt(t, b, "k", Success); !v.Go {
			t.Fatalf("the second probe: %+v", v)
		}
		if st := b.Status("k", time.Now()); st.State != store.Closed || st.Level != 1 {
			t.Errorf("after the probe's success: %+v, want closed at level 1", st)
		}
		want := []string{"closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed"}
		if len(changes) != len(want) {
			t.Fatalf("changes = %v, want %v", changes, want)
		}
		for i := range want {
			if changes[i] != want[i] {
				t.Errorf("changes = %v, want %v", changes, want)
				break
			}
		}
	})
}

// Refusals of one burst, sent before the first was seen, are one event;
// one within the last event's hint is not a new one either.
func TestRateLimitRefusalsCountOncePerEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(config(nil), nil, time.Minute)
		var burst []Ticket
		for range 3 {
			tk, v := tryLocal(b, "k", b.Acquire("k"))
			if !v.Go {
				t.Fatal(v)
			}
			tk.Sent()
			burst = append(burst, tk)
		}
		got := []Result{burst[0].RateLimitEvent(5 * time.Second), burst[1].RateLimitEvent(5 * time.Second)}
		if got[0] != Failure || got[1] != Excluded {
			t.Errorf("a burst's refusals = %v, want the first a failure, the sibling excluded", got)
		}
		for _, tk := range burst {
			tk.Outcome(context.Background(), Excluded, store.Cause{})
		}
		time.Sleep(time.Second)
		tk, _ := tryLocal(b, "k", b.Acquire("k"))
		tk.Sent()
		if r := tk.RateLimitEvent(0); r != Excluded {
			t.Errorf("a refusal 1s into the last event's 5s hint = %v, want excluded", r)
		}
		tk.Outcome(context.Background(), Excluded, store.Cause{})
		time.Sleep(5 * time.Second)
		tk, _ = tryLocal(b, "k", b.Acquire("k"))
		tk.Sent()
		if r := tk.RateLimitEvent(0); r != Failure {
			t.Errorf("a refusal after the hint = %v, want a new event", r)
		}
		tk.Outcome(context.Background(), Excluded, store.Cause{})
		if held := b.Held(); len(held) != 0 {
			t.Errorf("held after every outcome: %v", held)
		}
	})
}

// A probe that hangs past ProbeTimeout fails by itself, and opens the
// breaker a level up; one withdrawn unsent counts neither way.
func TestProbeTimeoutAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(config(nil), nil, time.Minute)
		attempt(t, b, "k", Failure)
		attempt(t, b, "k", Failure)
		time.Sleep(10 * time.Second)
		tk, v := tryLocal(b, "k", b.Acquire("k"))
		if !tk.Probe() {
			t.Fatalf("want the probe, got %+v", v)
		}
		tk.Cancel(context.Background())
		tk, _ = tryLocal(b, "k", b.Acquire("k"))
		if !tk.Probe() {
			t.Fatal("a probe withdrawn unsent did not give its place back")
		}
		tk.Sent()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		st := b.Status("k", time.Now())
		if st.State != store.Open || st.Level != 1 || st.Cause.Detail != "the probe had no answer within 30s" {
			t.Errorf("after the probe hung 30s: %+v, want open at level 1 for the timeout", st)
		}
		tk.Outcome(context.Background(), Success, store.Cause{}) // too late: counts for nothing
		if st := b.Status("k", time.Now()); st.State != store.Open {
			t.Errorf("the hung probe's late success changed the breaker: %+v", st)
		}
	})
}

func TestDecayedLevel(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		level int
		after time.Duration
		decay time.Duration
		want  int
	}{
		{0, time.Hour, time.Hour, 0},
		{3, 59 * time.Minute, time.Hour, 3},
		{3, time.Hour, time.Hour, 2},
		{3, 5 * time.Hour, time.Hour, 0},
		{2, 5 * time.Hour, 0, 2},
	}
	for _, tt := range tests {
		if got := DecayedLevel(tt.level, since, since.Add(tt.after), tt.decay); got != tt.want {
			t.Errorf("DecayedLevel(%d, +%v, decay %v) = %d, want %d", tt.level, tt.after, tt.decay, got, tt.want)
		}
	}
}

// recordingStore is a store.Breakers that records the trips told.
type recordingStore struct {
	store.Breakers
	trips []store.Trip
}

func (s *recordingStore) BreakerTripped(_ context.Context, _ string, trip store.Trip, _ *store.Rules) error {
	s.trips = append(s.trips, trip)
	return nil
}

func (s *recordingStore) BreakerFailed(context.Context, string, bool, store.Cause, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, nil
}

// A local trip is told to the store once, with its end and cause; the
// store's answer asked ahead stands for the store.
func TestTripsAreToldToTheStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &recordingStore{}
		b := New(config(nil), s, time.Minute)
		start := time.Now()
		attempt(t, b, "k", Failure)
		attempt(t, b, "k", Failure)
		b.PublishTrip(context.Background(), "k", b.Acquire("k")) // told already: not again
		if len(s.trips) != 1 || !s.trips[0].Until.Equal(start.Add(10*time.Second)) || s.trips[0].Cause.StatusCode != 503 {
			t.Errorf("trips told = %+v, want one, until 10s on, for the 503", s.trips)
		}
		asked := store.Breaker{State: store.Open, Until: start.Add(time.Hour)}
		if got, err := b.AskShared(context.Background(), "k", asked, true); err != nil || got != asked {
			t.Errorf("AskShared with an answer asked ahead = %+v, %v; want it", got, err)
		}
	})
}

// WindowFailures within Window trip the breaker, successes in between or
// not; a new Config takes effect on a clean breaker's next use.
func TestWindowFailuresAndANewConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config(nil)
		cfg.Rules.ConsecutiveFailures, cfg.Rules.WindowFailures = 10, 3
		b := New(cfg, nil, time.Minute)
		for _, r := range []Result{Failure, Success, Failure, Success, Failure} {
			attempt(t, b, "k", r)
		}
		if v := attempt(t, b, "k", Success); v.OpenFor != 10*time.Second {
			t.Fatalf("after 3 failures in the window, successes between: %+v, want open 10s", v)
		}
		// Another key, clean: a new Config of 1 failure trips it at once.
		attempt(t, b, "other", Success)
		strict := config(nil)
		strict.Rules.ConsecutiveFailures = 1
		b.SetConfig(strict)
		attempt(t, b, "other", Failure)
		if v := attempt(t, b, "other", Success); v.OpenFor == 0 {
			t.Errorf("under the new Config of 1 failure: %+v, want open", v)
		}
	})
}

// A clean breaker idle past the idle timeout is forgotten, and so is one
// whose first cooldown is over; one escalated by a failed probe is kept
// until its level decays.
func TestIdleBreakersAreForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(config(nil), nil, time.Minute)
		attempt(t, b, "clean", Success)
		attempt(t, b, "tripped", Failure)
		attempt(t, b, "tripped", Failure)
		attempt(t, b, "escalated", Failure)
		attempt(t, b, "escalated", Failure)
		time.Sleep(10 * time.Second)
		attempt(t, b, "escalated", Failure) // the probe fails: level 1
		for i := range 8 {                  // new keys bring the sweeps
			time.Sleep(30 * time.Second)
			attempt(t, b, "new-"+string(rune('a'+i)), Success)
		}
		if b.Kept("clean") {
			t.Error("a clean breaker idle 4m is kept")
		}
		if b.Kept("tripped") {
			t.Error("a breaker whose first cooldown ended minutes ago is kept")
		}
		if !b.Kept("escalated") {
			t.Error("a breaker at level 1, not decayed, is forgotten")
		}
	})
}

// tryLocal is Breakers.TryLocal returning the Ticket.
func tryLocal(b *Breakers, key string, e *Entry) (Ticket, Verdict) {
	var t Ticket
	v := b.TryLocal(&t, key, e)
	return t, v
}
