package limit

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestProbeRefusedByAWindowAboutToTurn: a probe refused by a server
// whose window is about to turn (its reset due) holds the window's
// turns back lateStep, doubling, and goes again, rather than make the
// window yield; a probe let through ends the holds; lateTries refusals
// in a row, and one more makes the window yield.
func TestProbeRefusedByAWindowAboutToTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, cfg, _ := filledWindow(t, 3, 10*time.Second)
		time.Sleep(cfg.Window + WindowMargin)
		waiter := probe(t, k, cfg, 1)
		for i := range lateTries {
			if !k.Yield(k.probe.at, time.Now(), true, cfg) {
				t.Fatalf("refusal %d of a probe by a window about to turn: Yield = false, want it taken for the window's own", i+1)
			}
			<-waiter.Probe
			r := answered(k, cfg)
			if want := lateStep << i; r.Delay != want || !r.Probing || !r.WindowTurn() {
				t.Fatalf("after refusal %d: the next turn = %+v; want the probe again, %v later", i+1, r, want)
			}
			k.Waited(&r, nil)
			time.Sleep(r.Delay)
			if waiter = answered(k, cfg); waiter.Probe == nil {
				t.Fatalf("after refusal %d: a turn beside the probe = %+v; want it to wait for the probe", i+1, waiter)
			}
		}
		if k.Yield(k.probe.at, time.Now(), true, cfg) {
			t.Fatalf("refusal %d in a row by a window about to turn: Yield = true, want the window to yield", lateTries+1)
		}
		<-waiter.Probe
		if r := answered(k, cfg); r.WindowTurn() {
			t.Errorf("the turn after the window yielded = %+v; want it spread", r)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		k, cfg, _ := filledWindow(t, 3, 10*time.Second)
		time.Sleep(cfg.Window + WindowMargin)
		probe(t, k, cfg, 1)
		k.Yield(k.probe.at, time.Now(), true, cfg)
		time.Sleep(lateStep)
		probe(t, k, cfg, 1)
		k.ProbeAnswered(true, cfg)
		if k.lateRefusals != 0 {
			t.Errorf("after a probe let through, %d late refusals are counted; want none", k.lateRefusals)
		}
		probe(t, k, cfg, 2)
		if k.Yield(k.probe.at, time.Now(), false, cfg) {
			t.Error("a refusal whose reset is not due: Yield = true, want the window to yield")
		}
	})
}
