package ratewise

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// youtubeBreaker is youtube-remediation-plan.md's breaker: 3 rate-limit
// errors within 10 minutes open it; cooldowns of 1h, 6h, 12h, 24h, 48h
// by level; a level decays after 48h; a detection within 24h of the last
// is a repeated one.
func youtubeBreaker() BreakerPolicy {
	return BreakerPolicy{
		ConsecutiveFailures: 3,
		WindowFailures:      3,
		Window:              10 * time.Minute,
		Cooldown:            time.Hour,
		Escalation:          []time.Duration{6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 48 * time.Hour},
		Decay:               48 * time.Hour,
		RetripWindow:        24 * time.Hour,
		ProbeTimeout:        30 * time.Second,
	}
}

// detect sends three requests a minute apart, each refused: one
// detection, which opens tr's breaker. It returns the breaker's
// *CircuitOpenError met right after.
func detect(t *testing.T, tr *Transport) *CircuitOpenError {
	t.Helper()
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Minute)
		}
		if _, err := callOnce(t, tr, noWait()); err != nil {
			t.Fatalf("refusal %d of the detection: %v, want it sent", i+1, err)
		}
	}
	_, err := callOnce(t, tr, noWait())
	var open *CircuitOpenError
	if !errors.As(err, &open) {
		t.Fatalf("after the detection: err = %v, want the breaker open", err)
	}
	return open
}

// probeOK waits out the cooldown, then sends the probe, answered 200.
func probeOK(t *testing.T, tr *Transport, s *script, refusal step) {
	t.Helper()
	time.Sleep(tr.KeyStatus(host).Breaker.ResetIn)
	s.reset(answer(200), refusal)
	if status, err := callOnce(t, tr, noWait()); status != 200 {
		t.Fatalf("probe = %d, %v; want 200", status, err)
	}
	if st := tr.KeyStatus(host).Breaker.State; st != BreakerClosed {
		t.Fatalf("after a good probe: %v, want closed", st)
	}
}

// youtube-remediation-plan.md, Phase 2 "Cooldown duration by backoff
// level": the first detection opens the breaker for 1h, a second within
// 24h for 6h, a third within 24h for 12h, although every probe between
// them succeeded; one past the 24h starts from the level the 48h decay
// left. Today's failed-probe escalation is not needed for any of it.
func TestBreakerRepeatedDetectionsEscalate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := answer(429)
		s := newScript(refusal)
		tr := breakerTransport(s.mock(), youtubeBreaker())
		steps := []struct {
			name      string
			quiet     time.Duration // after the last probe closed it
			level     int
			cooldown  time.Duration
			wantFirst bool
		}{
			{name: "first detection", level: 0, cooldown: time.Hour, wantFirst: true},
			{name: "second, 3h after a good probe", quiet: 3 * time.Hour, level: 1, cooldown: 6 * time.Hour},
			{name: "third, 23h after", quiet: 23 * time.Hour, level: 2, cooldown: 12 * time.Hour},
			{name: "fourth, 1h after", quiet: time.Hour, level: 3, cooldown: 24 * time.Hour},
			// 26h after the last close, and 50h after the last opening:
			// past the window, and one 48h decay down from level 3.
			{name: "past the 24h window", quiet: 26 * time.Hour, level: 2, cooldown: 12 * time.Hour},
		}
		for i, st := range steps {
			if i > 0 {
				probeOK(t, tr, s, refusal)
				time.Sleep(st.quiet)
			}
			open := detect(t, tr)
			b := tr.KeyStatus(host).Breaker
			if open.ResetIn != st.cooldown || b.Level != st.level {
				t.Errorf("%s: open for %v at level %d, want %v at level %d", st.name, open.ResetIn, b.Level, st.cooldown, st.level)
			}
		}
	})
}

// youtube-remediation-plan.md, Phase 2: with NoRetripEscalation a trip
// after a good probe starts from the level the decay left, as every trip
// did before RetripWindow.
func TestBreakerNoRetripEscalation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := answer(429)
		s := newScript(refusal)
		p := youtubeBreaker()
		p.RetripWindow = NoRetripEscalation
		tr := breakerTransport(s.mock(), p)
		detect(t, tr)
		probeOK(t, tr, s, refusal)
		time.Sleep(3 * time.Hour)
		if open := detect(t, tr); open.ResetIn != time.Hour {
			t.Errorf("a trip 3h after a good probe: open for %v, want 1h, the first level again", open.ResetIn)
		}
	})
}

// RetripWindow's zero value is Decay: a breaker with an Escalation that
// trips again within its Decay of closing goes a level up.
func TestBreakerRetripWindowDefaultsToDecay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := answer(503)
		s := newScript(refusal)
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 3, Cooldown: time.Minute,
			Escalation: []time.Duration{5 * time.Minute}, Decay: time.Hour})
		if p, _ := tr.BreakerPolicy(); p.RetripWindow != time.Hour {
			t.Errorf("RetripWindow = %v, want the Decay, 1h", p.RetripWindow)
		}
		detect(t, tr)
		probeOK(t, tr, s, refusal)
		time.Sleep(30 * time.Minute)
		if open := detect(t, tr); open.ResetIn != 5*time.Minute {
			t.Errorf("a trip within the Decay of closing: open for %v, want 5m", open.ResetIn)
		}
	})
}

// youtube-remediation-plan.md, Phase 2 "Multi-instance: all backend
// instances share breaker state" with the cooldown table: replica a is
// refused and closes its breaker after a good probe; replica b's
// detection 3h later, counted in the shared store, opens the shared
// breaker for 6h, and a's requests wait for it too.
func TestSharedBreakerRepeatedDetectionsEscalate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore()
		p := youtubeBreaker()
		p.Store = mem
		refusal := answer(429)
		sa, sb := newScript(refusal), newScript(refusal)
		a := breakerTransport(sa.mock(), p)
		b := breakerTransport(sb.mock(), p)
		detect(t, a)
		probeOK(t, a, sa, refusal)
		time.Sleep(3 * time.Hour)
		open := detect(t, b)
		if open.ResetIn != 6*time.Hour {
			t.Errorf("second detection, by b: open for %v, want 6h", open.ResetIn)
		}
		_, err := callOnce(t, a, noWait())
		var aOpen *CircuitOpenError
		if !errors.As(err, &aOpen) || aOpen.ResetIn != 6*time.Hour {
			t.Errorf("a after b's detection: err = %v, want the shared breaker open for 6h", err)
		}
		if blocked, d := a.Blocking(host); !blocked || d != 6*time.Hour {
			t.Errorf("a.Blocking = %v, %v; want true, 6h", blocked, d)
		}
	})
}

// SetBreakerPolicy applies to the next decision: lowered thresholds trip
// a breaker already counting, and a new cooldown times the next trip.
// youtube-remediation-plan.md §5, hot-reload table:
// "circuit-breaker.cooldown-*" and "rolling-window.*" are hot-reloadable.
func TestSetBreakerPolicyAppliesToTheNextDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(503))
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 5, Cooldown: time.Minute})
		for range 2 {
			_, _ = callOnce(t, tr, noWait())
		}
		if err := tr.SetBreakerPolicy(BreakerPolicy{ConsecutiveFailures: 3, Cooldown: 10 * time.Minute}); err != nil {
			t.Fatal(err)
		}
		_, _ = callOnce(t, tr, noWait()) // the third failure in a row
		_, err := callOnce(t, tr, noWait())
		var open *CircuitOpenError
		if !errors.As(err, &open) || open.ResetIn != 10*time.Minute {
			t.Fatalf("after the third failure under the new policy: err = %v, want open for 10m", err)
		}
		if p, ok := tr.BreakerPolicy(); !ok || p.ConsecutiveFailures != 3 || p.Cooldown != 10*time.Minute {
			t.Errorf("BreakerPolicy() = %+v, %v; want the new one", p, ok)
		}
	})
}

// A breaker clean when the policy changes counts anew under it: its
// Window too, which the new policy adds.
func TestSetBreakerPolicyRebuildsAClosedBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := breakerTransport(s.mock(), BreakerPolicy{ConsecutiveFailures: 10})
		_, _ = callOnce(t, tr, noWait())
		if err := tr.SetBreakerPolicy(BreakerPolicy{ConsecutiveFailures: 10, WindowFailures: 2, Window: time.Minute}); err != nil {
			t.Fatal(err)
		}
		s.reset(answer(503), answer(200), answer(503), answer(200))
		for range 3 {
			_, _ = callOnce(t, tr, noWait())
			time.Sleep(time.Second)
		}
		if st := tr.KeyStatus(host).Breaker.State; st != BreakerOpen {
			t.Errorf("two failures within the new Window, a success between: %v, want open", st)
		}
	})
}

func TestSetBreakerPolicyRefuses(t *testing.T) {
	mem := NewMemoryStore()
	tr := New(nil, WithBreaker(BreakerPolicy{Store: mem}))
	tests := []struct {
		name string
		give BreakerPolicy
		want string
	}{
		{name: "invalid", give: BreakerPolicy{ConsecutiveFailures: -1, Store: mem}, want: "ConsecutiveFailures (-1)"},
		{name: "another key", give: BreakerPolicy{Key: Global, Store: mem}, want: "its Key"},
		{name: "another store", give: BreakerPolicy{Store: NewMemoryStore()}, want: "its Store"},
		{name: "no store", give: BreakerPolicy{}, want: "its Store"},
		{name: "another idle timeout", give: BreakerPolicy{IdleTimeout: time.Minute, Store: mem}, want: "its IdleTimeout"},
	}
	for _, tt := range tests {
		err := tr.SetBreakerPolicy(tt.give)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.want)
		}
	}
	if p, _ := tr.BreakerPolicy(); p.ConsecutiveFailures != DefaultConsecutiveFailures {
		t.Errorf("a refused policy changed it: %+v", p)
	}
	if err := New(nil).SetBreakerPolicy(BreakerPolicy{}); err == nil || !strings.Contains(err.Error(), "WithBreaker") {
		t.Errorf("without a breaker: err = %v, want one saying to use WithBreaker", err)
	}
	if _, ok := New(nil).BreakerPolicy(); ok {
		t.Error("BreakerPolicy() of a transport without a breaker reports one")
	}
	if err := (BreakerPolicy{RetripWindow: -2}).Validate(); err == nil || !strings.Contains(err.Error(), "RetripWindow (-2ns)") {
		t.Errorf("RetripWindow -2: Validate = %v, want it named", err)
	}
	if err := (BreakerPolicy{RetripWindow: NoRetripEscalation}).Validate(); err != nil {
		t.Errorf("NoRetripEscalation: Validate = %v", err)
	}
}
