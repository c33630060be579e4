package limit

import (
	"testing"
	"testing/synctest"
	"time"
)

// answered reserves one turn whose answer the caller tells.
func answered(k *Key, cfg *Config) Reservation {
	var r Reservation
	if err := k.ReserveAnswered(&r, false, cfg, time.Time{}); err != nil {
		panic(err)
	}
	return r
}

// fillWindow takes a window's whole count at once, as a first wave does.
func fillWindow(t *testing.T, k *Key, cfg *Config) {
	t.Helper()
	for i := range cfg.Burst {
		if r := answered(k, cfg); r.Delay != 0 || r.Probing || r.Probe != nil {
			t.Fatalf("turn %d of the first window = %+v; want at once, no probe", i, r)
		}
	}
}

// probe takes the n turns of a probe, each at once and Probing, and
// checks that the next turn waits for their answers.
func probe(t *testing.T, k *Key, cfg *Config, n int) Reservation {
	t.Helper()
	for i := range n {
		if r := answered(k, cfg); !r.Probing || r.Delay != 0 || r.Probe != nil {
			t.Fatalf("turn %d of a probe of %d = %+v; want at once, probing", i, n, r)
		}
	}
	waiter := answered(k, cfg)
	if waiter.Probe == nil || waiter.Probing {
		t.Fatalf("the turn after a probe of %d = %+v; want it to wait for the probe's answers", n, waiter)
	}
	return waiter
}

// TestWindowProbesItsSecondWindow: past the first window, the window's
// turns go in probes of 1, 2, 4, ... up to Burst, each waiting for the
// answers of the one before. A probe of Burst let through proves the
// window: later turns, and later windows, go at once with no probe.
func TestWindowProbesItsSecondWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 3, Window: 10 * time.Second}
		k := newKey(cfg)
		fillWindow(t, k, cfg)
		time.Sleep(11 * time.Second)
		for _, n := range []int{1, 2} {
			waiter := probe(t, k, cfg, n)
			for i := range n {
				select {
				case <-waiter.Probe:
					t.Fatalf("a probe of %d answered %d times: its waiters go already", n, i)
				default:
				}
				k.ProbeAnswered(true, cfg)
			}
			<-waiter.Probe // would block the bubble forever if still open
		}
		time.Sleep(11 * time.Second)
		probe(t, k, cfg, 3)
		for range 3 {
			k.ProbeAnswered(true, cfg)
		}
		time.Sleep(11 * time.Second)
		for i := range 3 {
			if r := answered(k, cfg); r.Delay != 0 || r.Probe != nil || r.Probing {
				t.Fatalf("turn %d of a proven window = %+v; want at once, no probe", i, r)
			}
		}
	})
}

// TestRefusedProbeYields: a refused probe makes the window yield; its
// waiters go, and their turns are spread.
func TestRefusedProbeYields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 3, Window: 10 * time.Second}
		k := newKey(cfg)
		fillWindow(t, k, cfg)
		time.Sleep(11 * time.Second)
		waiter := probe(t, k, cfg, 1)
		k.Yield(time.Time{}, time.Now(), false, cfg)
		<-waiter.Probe
		if r := answered(k, cfg); r.Delay != yieldGap(cfg) || r.Probe != nil || r.Probing {
			t.Errorf("a turn after the refused probe = %+v; want spread, %v away", r, yieldGap(cfg))
		}
	})
}

// TestLostProbe: a probe whose answers are later than probeWait, or one
// a turn of which was not sent, does not hold the window: the next turn
// probes again, at the same size.
func TestLostProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 5, Window: 10 * time.Second}
		k := newKey(cfg)
		fillWindow(t, k, cfg)
		time.Sleep(11 * time.Second)
		probe(t, k, cfg, 1) // never answered
		time.Sleep(probeWait(cfg))
		probe(t, k, cfg, 1)
		k.ProbeAnswered(false, cfg) // not sent
		probe(t, k, cfg, 1)
	})
}

// TestReserveProbesNothing: Reserve, whose caller tells no answer (a
// turn for work that is not a request), never probes nor waits for one.
func TestReserveProbesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 2, Window: 10 * time.Second}
		k := newKey(cfg)
		fillWindow(t, k, cfg)
		time.Sleep(11 * time.Second)
		answered(k, cfg) // a probe out
		r, err := reserve(k, false, cfg, 1, time.Time{})
		if err != nil || r.Probing || r.Probe != nil || r.Delay != 0 {
			t.Errorf("Reserve while a probe is out = %+v, %v; want its turn at once", r, err)
		}
	})
}
