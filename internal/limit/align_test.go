package limit

import (
	"testing"
	"testing/synctest"
	"time"
)

// filledWindow is a key of a window of burst per window, its count taken
// whole at once, now, the first window's start.
func filledWindow(t *testing.T, burst int, window time.Duration) (*Key, *Config, time.Time) {
	t.Helper()
	cfg := &Config{Burst: burst, Window: window}
	k := newKey(cfg)
	t0 := time.Now()
	fillWindow(t, k, cfg)
	return k, cfg, t0
}

// TestWindowTakesTheServersTurn: told 3 per 10 s, a window whose first
// three starts the server counted in a window of its own that ends 4 s
// later (Align) gives its next turn then, as the window's probe, not
// 10 s after the starts. The probe let through shows the turn right: the
// window takes no more resets, and the next probe, of 2, goes at once.
func TestWindowTakesTheServersTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, cfg, t0 := filledWindow(t, 3, 10*time.Second)
		time.Sleep(time.Second)
		k.Align(t0, t0.Add(4*time.Second), false, time.Now(), cfg)
		r := answered(k, cfg)
		if want := 3*time.Second + WindowMargin; r.Delay != want || !r.Probing || !r.WindowTurn() {
			t.Fatalf("the turn after the server's turn was told = %+v; want a probe %v away, at the turn", r, want)
		}
		k.Waited(&r, nil)
		if k.Aligned() {
			t.Fatal("Aligned before the turn's probe was answered; want the window to go on reading resets")
		}
		time.Sleep(r.Delay)
		k.ProbeAnswered(true, cfg)
		if !k.Aligned() {
			t.Error("Aligned is false after the turn's probe was let through; want the resets read no more")
		}
		probe(t, k, cfg, 2)
	})
}

// TestEarlyProbeRefusedTrustsTheStartsAgain: a reset cut to its second
// frees a turn before the server's window turned, and the server
// refuses it. The window then counts each start's own Window again, and
// does not yield: later resets are not read, and the next turn is the
// window's, 10 s after the first starts.
func TestEarlyProbeRefusedTrustsTheStartsAgain(t *testing.T) {
	for _, before := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			k, cfg, t0 := filledWindow(t, 3, 10*time.Second)
			k.Align(t0, t0.Add(4*time.Second), false, time.Now(), cfg)
			var waiter Reservation
			if before {
				// The probe's turn taken before it comes, in the first window.
				r := answered(k, cfg)
				if !r.Probing || r.Delay != 4*time.Second+WindowMargin {
					t.Fatalf("the turn after the first window's = %+v; want the probe, at the server's turn", r)
				}
				k.Waited(&r, nil)
				waiter = answered(k, cfg)
				time.Sleep(r.Delay)
			} else {
				time.Sleep(4*time.Second + WindowMargin)
				waiter = probe(t, k, cfg, 1)
			}
			if k.Yield(k.probe.at, time.Now(), false, cfg) != true {
				t.Fatal("Yield of the early probe's refusal = false; want it taken for the window's own")
			}
			<-waiter.Probe
			if !k.Aligned() {
				t.Fatal("Aligned is false after the early probe was refused; want the resets read no more")
			}
			k.Align(t0, t0.Add(5*time.Second), false, time.Now(), cfg) // read no more
			r := answered(k, cfg)
			if want := 6 * time.Second; r.Delay != want || !r.WindowTurn() || !r.Probing {
				t.Fatalf("reserved before the turn %v: the turn after the refused early probe = %+v; want the window's probe %v away, 10 s after the starts, not a spread",
					before, r, want)
			}
		})
	}
}

// TestAlignIgnoresResetsThatSayNothing: a reset not after the start,
// one a Window or more after it, or one before a turn already taken,
// frees no turn, nor does a turn free a start it did not count (one
// after the answered start); a window that yielded reads no resets.
func TestAlignIgnoresResetsThatSayNothing(t *testing.T) {
	own := 7*time.Second + WindowMargin // 3 s in, the starts' own Window
	cases := []struct {
		name  string
		align func(k *Key, t0 time.Time, cfg *Config)
		next  time.Duration // the next turn's wait, 3 s in
	}{
		{"at the start", func(k *Key, t0 time.Time, cfg *Config) { k.Align(t0, t0, false, t0, cfg) }, own},
		{"a Window after", func(k *Key, t0 time.Time, cfg *Config) { k.Align(t0, t0.Add(cfg.Window), false, t0, cfg) }, own},
		{"no start", func(k *Key, t0 time.Time, cfg *Config) { k.Align(time.Time{}, t0.Add(time.Second), false, t0, cfg) }, own},
		{"before a turn taken", func(k *Key, t0 time.Time, cfg *Config) {
			k.Align(t0, t0.Add(9*time.Second), false, t0, cfg)
			k.Align(t0, t0.Add(2*time.Second), false, t0, cfg)
		}, 6*time.Second + WindowMargin}, // at the first turn told, 9 s in
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k, cfg, t0 := filledWindow(t, 2, 10*time.Second)
				tc.align(k, t0, cfg)
				time.Sleep(3 * time.Second)
				if r := answered(k, cfg); r.Delay != tc.next {
					t.Errorf("the next turn = %+v; want it in %v", r, tc.next)
				}
			})
		})
	}

	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 2, Window: 10 * time.Second}
		k := newKey(cfg)
		t0 := time.Now()
		answered(k, cfg)
		time.Sleep(time.Second)
		answered(k, cfg)
		k.Align(t0, t0.Add(4*time.Second), false, time.Now(), cfg) // the answer to the first start
		time.Sleep(3*time.Second + WindowMargin)
		r := answered(k, cfg)
		if r.Delay != 0 {
			t.Fatalf("the turn the first start freed = %+v; want it at once", r)
		}
		k.Waited(&r, nil)
		k.ProbeAnswered(true, cfg)
		if r := answered(k, cfg); r.Delay != 7*time.Second {
			t.Errorf("the turn after = %+v; want 7 s away: the second start, which the turn did not count, keeps its Window", r)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 2, Window: 10 * time.Second}
		k := newKey(cfg)
		k.Yield(time.Time{}, time.Now(), false, cfg)
		if !k.Aligned() {
			t.Error("Aligned is false after a yield; want the spread to read no resets")
		}
	})
}

// TestCoarseResetLessThanASecondEarly: a reset given to the second that
// would free the starts less than a second before their own Window may
// be only cut to its second, and is not taken by a window of 10 s; one
// that frees them sooner is, and so is any, by a window of a second.
func TestCoarseResetLessThanASecondEarly(t *testing.T) {
	for _, tc := range []struct {
		window, early time.Duration
		taken         bool
	}{
		{10 * time.Second, 900 * time.Millisecond, false},
		{10 * time.Second, 1100 * time.Millisecond, true},
		{time.Second, 300 * time.Millisecond, true},
	} {
		synctest.Test(t, func(t *testing.T) {
			k, cfg, t0 := filledWindow(t, 2, tc.window)
			k.Align(t0, t0.Add(tc.window-tc.early), true, time.Now(), cfg)
			want := tc.window + WindowMargin
			if tc.taken {
				want -= tc.early
			}
			if r := answered(k, cfg); r.Delay != want {
				t.Errorf("a window of %v told a reset %v before its own: the next turn in %v, want %v", tc.window, tc.early, r.Delay, want)
			}
		})
	}
}

// TestResetsANanosecondApartSayOneTurn: read as waits from each answer's
// now, on the monotonic clock, the resets of one server window differ
// by the nanoseconds the wall clock slews: each still covers its start,
// and all three starts leave at the turn.
func TestResetsANanosecondApartSayOneTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 3, Window: 10 * time.Second}
		k := newKey(cfg)
		t0 := time.Now()
		for range 3 {
			answered(k, cfg)
			time.Sleep(time.Second)
		}
		turn := t0.Add(5 * time.Second)
		k.Align(t0, turn, false, time.Now(), cfg)
		k.Align(t0.Add(time.Second), turn.Add(time.Nanosecond), false, time.Now(), cfg)
		k.Align(t0.Add(2*time.Second), turn.Add(-time.Nanosecond), false, time.Now(), cfg)
		time.Sleep(time.Until(turn.Add(WindowMargin)))
		for i := range 3 {
			r := answered(k, cfg)
			if r.Delay != 0 {
				t.Fatalf("turn %d at the server's = %+v; want it at once: each start was counted in the window that ended", i, r)
			}
			k.ProbeAnswered(true, cfg)
		}
	})
}

// TestToldAnewReadsResetsAgain: a window that read no more resets (its
// early probe refused) reads them again once told anew.
func TestToldAnewReadsResetsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, cfg, t0 := filledWindow(t, 2, 10*time.Second)
		k.Align(t0, t0.Add(4*time.Second), false, time.Now(), cfg)
		time.Sleep(4*time.Second + WindowMargin)
		probe(t, k, cfg, 1)
		k.Yield(k.probe.at, time.Now(), false, cfg)
		if !k.Aligned() {
			t.Fatal("Aligned is false after the early probe was refused")
		}
		k.CatchUp(1, cfg, time.Now())
		if k.Aligned() {
			t.Fatal("Aligned is true once told anew; want the resets read again")
		}
		t1 := time.Now()
		k.Align(t0, t1.Add(time.Second), false, t1, cfg)
		time.Sleep(time.Second + WindowMargin)
		if r := answered(k, cfg); r.Delay != 0 {
			t.Errorf("a turn at a reset told anew = %+v; want it at once", r)
		}
	})
}
