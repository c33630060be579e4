package limit

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestWindowYieldSpreadsItsTurns: a window gives its turns from its
// count, at once; once yielded, every turn is spaced Window/(Burst−½),
// the first a gap after the yield, and none is a WindowTurn. Told anew
// (a new generation), it gives its count at once again.
func TestWindowYieldSpreadsItsTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 5, Window: 10 * time.Second}
		k := newKey(cfg)
		r, err := reserve(k, false, cfg, 1, time.Time{})
		if err != nil || r.Delay != 0 || !r.WindowTurn() {
			t.Fatalf("the first turn = %+v, %v; want at once, from the window's count", r, err)
		}
		k.Yield(time.Time{}, time.Now(), false, cfg)
		gap := 20 * time.Second / 9 // Burst−½ per 10 s
		for i := 1; i <= 6; i++ {
			r, err := reserve(k, false, cfg, 1, time.Time{})
			if err != nil || r.Delay != time.Duration(i)*gap || r.WindowTurn() {
				t.Fatalf("turn %d after the yield = %+v, %v; want %v, spread", i, r, err, time.Duration(i)*gap)
			}
			k.Waited(&r, nil)
		}
		k.Yield(time.Time{}, time.Now(), false, cfg) // yielded already: the spread stands
		if r, _ := reserve(k, false, cfg, 1, time.Time{}); r.Delay != 7*gap {
			t.Errorf("a turn after a second yield waits %v, want %v: the spread goes on", r.Delay, 7*gap)
		}

		time.Sleep(time.Minute)
		k.CatchUp(1, cfg, time.Now())
		for i := range 5 {
			if r, _ := reserve(k, false, cfg, 1, time.Time{}); r.Delay != 0 || !r.WindowTurn() {
				t.Fatalf("turn %d told anew = %+v, want at once from the window's count", i, r)
			}
		}
	})
}

// TestYieldOfAOneRequestWindow: a window of one request per Window,
// yielded, spaces its turns a Window apart.
func TestYieldOfAOneRequestWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 1, Window: time.Second}
		k := newKey(cfg)
		k.Yield(time.Time{}, time.Now(), false, cfg)
		if d := reserveNow(t, k, cfg); d != time.Second {
			t.Errorf("the first turn after the yield waits %v, want the window", d)
		}
	})
}
