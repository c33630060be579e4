package limit

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func newKey(cfg *Config) *Key {
	k := new(Key)
	k.Init(0, cfg)
	return k
}

// reserveNow reserves one turn and returns its delay, failing the test on
// a refusal.
func reserveNow(t *testing.T, k *Key, cfg *Config) time.Duration {
	t.Helper()
	r, err := reserve(k, false, cfg, 1, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Delay > 0 {
		k.Waited(&r, nil)
	}
	return r.Delay
}

func TestBucketTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Rate: 1, Burst: 2}
		k := newKey(cfg)
		got := []time.Duration{reserveNow(t, k, cfg), reserveNow(t, k, cfg), reserveNow(t, k, cfg), reserveNow(t, k, cfg)}
		want := []time.Duration{0, 0, time.Second, 2 * time.Second}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("delays = %v, want %v", got, want)
			}
		}
	})
}

// A wait that ends in an error gives its turn back: the next request
// takes the same place.
func TestWaitedWithAnErrorGivesTheTurnBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, cfg := range []*Config{
			{Rate: 1, Burst: 1},
			{MinSpacing: time.Second},
			{Burst: 1, Window: time.Second},
		} {
			k := newKey(cfg)
			reserveNow(t, k, cfg)
			r, err := reserve(k, false, cfg, 1, time.Time{})
			if err != nil || r.Delay <= 0 {
				t.Fatalf("%+v: the second turn = %+v, %v; want a wait", cfg, r, err)
			}
			if again := k.Waited(&r, errors.New("gave up")); again {
				t.Errorf("%+v: Waited with an error says again", cfg)
			}
			if r2, _ := reserve(k, false, cfg, 1, time.Time{}); r2.Delay != r.Delay {
				t.Errorf("%+v: after the turn was given back, the next waits %v, want %v", cfg, r2.Delay, r.Delay)
			}
			if _, waiting, _ := k.Pending(); waiting != 1 {
				t.Errorf("%+v: %d waiting, want the one reserved", cfg, waiting)
			}
		}
	})
}

func TestWindowTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Burst: 3, Window: 10 * time.Second}
		k := newKey(cfg)
		for range 3 {
			if d := reserveNow(t, k, cfg); d != 0 {
				t.Fatalf("a turn within the window's 3 waits %v", d)
			}
		}
		if d := reserveNow(t, k, cfg); d != 10*time.Second+WindowMargin {
			t.Errorf("the 4th turn waits %v, want a window and the margin", d)
		}
		if s := k.Snapshot(time.Now(), cfg); !s.HasTokens || s.Tokens != 0 {
			t.Errorf("Snapshot = %+v, want no room", s)
		}
	})
}

// A low-priority request leaves Reserve tokens in the bucket: it waits
// until there are more, then asks again.
func TestLowPriorityLeavesTheReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Rate: 1, Burst: 3, Reserve: 2}
		k := newKey(cfg)
		if r, _ := reserve(k, true, cfg, 1, time.Time{}); r.Delay != 0 {
			t.Fatalf("a low-priority turn with 3 tokens waits %v", r.Delay)
		}
		r, _ := reserve(k, true, cfg, 1, time.Time{})
		if r.Delay != time.Second {
			t.Fatalf("with 2 tokens left, all reserved: waits %v, want 1s", r.Delay)
		}
		time.Sleep(r.Delay)
		if !k.Waited(&r, nil) {
			t.Error("the wait for the reserve to fill does not ask again")
		}
		if d := reserveNow(t, k, cfg); d != 0 {
			t.Errorf("a normal turn with 3 tokens waits %v", d)
		}
	})
}

func TestRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			cfg      Config
			deadline time.Duration
			want     string
		}{
			{Config{Rate: 1, Burst: 1, FailFast: true}, 0, "fail-fast"},
			{Config{Rate: 1, Burst: 1}, 500 * time.Millisecond, "max-wait"},
			{Config{Rate: 1, Burst: 1, MaxQueue: 1}, 0, "max-queue"},
		}
		for _, tt := range tests {
			k := newKey(&tt.cfg)
			reserveNow(t, k, &tt.cfg)
			if tt.want == "max-queue" { // one waits already
				if _, err := reserve(k, false, &tt.cfg, 1, time.Time{}); err != nil {
					t.Fatal(err)
				}
			}
			var deadline time.Time
			if tt.deadline > 0 {
				deadline = time.Now().Add(tt.deadline)
			}
			_, err := reserve(k, false, &tt.cfg, 1, deadline)
			var r *Refusal
			if !errors.As(err, &r) || r.Reason != tt.want {
				t.Errorf("%+v: Reserve = %v, want a %s refusal", tt.cfg, err, tt.want)
			}
		}
	})
}

// Slots go to waiters by priority, the same priority in order; a waiter
// that gives up leaves the queue, and one granted as it gave up passes the
// slot on.
func TestSlotsByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{MaxConcurrent: 1, Learned: true}
		k := newKey(cfg)
		if w, err := k.TakeSlot(cfg, 0, time.Time{}); w != nil || err != nil {
			t.Fatalf("the free slot: %v, %v", w, err)
		}
		low, _ := k.TakeSlot(cfg, -1, time.Time{})
		normal, _ := k.TakeSlot(cfg, 0, time.Time{})
		gone, _ := k.TakeSlot(cfg, 1, time.Time{})
		k.LeaveQueue(gone, errors.New("gave up"), cfg.MaxConcurrent)
		k.ReleaseSlot(cfg.MaxConcurrent)
		select {
		case <-normal.Ready():
		default:
			t.Fatal("the freed slot did not go to the normal-priority waiter")
		}
		k.LeaveQueue(normal, nil, cfg.MaxConcurrent)
		select {
		case <-low.Ready():
			t.Fatal("the low-priority waiter got a slot while the cap was taken")
		default:
		}
		k.ReleaseSlot(cfg.MaxConcurrent) // normal's request ends
		<-low.Ready()
		k.LeaveQueue(low, nil, cfg.MaxConcurrent)
		k.ReleaseSlot(cfg.MaxConcurrent)
		if slots, waiting, queued := k.Pending(); slots != 0 || waiting != 0 || queued != 0 {
			t.Errorf("Pending = %d, %d, %d", slots, waiting, queued)
		}
	})
}

// TrySlot takes a free slot, and none when the cap is taken or a request
// waits in the queue, even with a slot free: it does not jump the line.
func TestTrySlotTakesOnlyAFreeSlotNobodyWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{MaxConcurrent: 2}
		k := newKey(cfg)
		for i := range cfg.MaxConcurrent {
			if !k.TrySlot(cfg.MaxConcurrent) {
				t.Fatalf("TrySlot refused free slot %d", i+1)
			}
		}
		if k.TrySlot(cfg.MaxConcurrent) {
			t.Fatal("TrySlot took a third slot of 2")
		}
		w, err := k.TakeSlot(cfg, 0, time.Time{})
		if w == nil || err != nil {
			t.Fatalf("TakeSlot with the cap taken = %v, %v; want a place in the queue", w, err)
		}
		k.ReleaseSlot(cfg.MaxConcurrent) // the slot goes to w
		if k.TrySlot(cfg.MaxConcurrent) {
			t.Error("TrySlot took the slot freed for the waiter")
		}
		<-w.Ready()
		k.LeaveQueue(w, nil, cfg.MaxConcurrent)
		k.ReleaseSlot(cfg.MaxConcurrent)
		if !k.TrySlot(cfg.MaxConcurrent) {
			t.Error("TrySlot refused a slot freed with nobody waiting")
		}
	})
}

// A new Config keeps the bucket's tokens and changes its rate.
func TestCatchUpKeepsTheTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Rate: 10, Burst: 5}
		k := newKey(cfg)
		reserveNow(t, k, cfg)
		if !k.UpToDate(0) || k.UpToDate(1) {
			t.Fatal("UpToDate does not tell the generation")
		}
		k.CatchUp(1, &Config{Rate: 1, Burst: 5}, time.Now())
		if got := k.BucketRate(); got != 1 {
			t.Errorf("BucketRate = %v, want 1", float64(got))
		}
		if s := k.Snapshot(time.Now(), &Config{Rate: 1, Burst: 5}); s.Tokens != 4 {
			t.Errorf("tokens after the new Config = %v, want the 4 left", s.Tokens)
		}
		if k.Idle(time.Now(), 0) {
			t.Error("a bucket short of a token is idle")
		}
		time.Sleep(time.Second)
		if !k.Idle(time.Now(), 0) {
			t.Error("a full bucket is not idle")
		}
	})
}

// reserve is Key.Reserve returning the Reservation.
func reserve(k *Key, low bool, cfg *Config, n int, deadline time.Time) (Reservation, error) {
	var r Reservation
	err := k.Reserve(&r, low, cfg, n, deadline)
	return r, err
}

// TestBucketTurnsNeverComeEarly: a bucket's turns come no earlier than
// its rate allows, to the nanosecond, as a server counting in whole
// nanoseconds (a GCRA) counts them: 20 a second, burst 10, 3000 turns
// taken at once (rate.Limiter's float tokens gave 75 of them a
// nanosecond early).
func TestBucketTurnsNeverComeEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := &Config{Rate: 20, Burst: 10}
		k := newKey(cfg)
		early := 0
		for i := range 3000 {
			due := time.Duration(max(i-9, 0)) * 50 * time.Millisecond
			if d := reserveNow(t, k, cfg); d < due || d > due+time.Microsecond {
				early++
				if early <= 3 {
					t.Errorf("turn %d came after %v, want %v to a microsecond after", i, d, due)
				}
			}
		}
		if early > 0 {
			t.Errorf("%d turns of 3000 off their time", early)
		}
	})
}
