package scopes

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/internal/limit"
)

// request is a Request whose waits are refused: a test that admits
// through it expects no wait.
func request(t *testing.T) *Request {
	return &Request{Ctx: context.Background, Left: func() time.Duration { return time.Hour },
		Wait: func(w Wait) error {
			t.Errorf("a wait of %v asked, want none", w.D)
			return errors.New("no wait")
		}}
}

// TestReadAnswer: an answer the call read as a refusal is one for the
// learned pace, whatever its status; a 2xx one that is not is a success;
// its count is read either way (learn's TestReadAnswer reads the
// counts). A request that got no response tells neither.
func TestReadAnswer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{"X-Ratelimit-Remaining": {"3"}}
	tests := []struct {
		status  int
		refused bool
		want    learn.Answer
	}{
		{200, false, learn.Answer{OK: true, Remaining: 3}},
		{503, false, learn.Answer{Remaining: 3}},
		{429, true, learn.Answer{Refused: true, Remaining: 3}},
		{200, true, learn.Answer{Refused: true, Remaining: 3}},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: h}
		tt.want.Flight = -1 // a response says nothing of it
		if got := readAnswer(Answer{Resp: resp, Refused: tt.refused}, now); got != tt.want {
			t.Errorf("readAnswer(%d, refused %v) = %+v, want %+v", tt.status, tt.refused, got, tt.want)
		}
	}
	if got := readAnswer(Answer{Err: errors.New("reset")}, now); got != (learn.Answer{Remaining: -1, Flight: -1}) {
		t.Errorf("network error: readAnswer = %+v, want no outcome and no count", got)
	}
}

// A Set that lands while an admission is between reading the limit and
// catching its key up is not lost: catchUp reads the limit itself, after
// the generation.
func TestSetBetweenAdmissionsIsNotLost(t *testing.T) {
	s := New("a", false, false, time.Minute, Config{Config: limit.Config{Rate: 100, Burst: 10}}, new(Shared))
	if _, err := s.Admit(request(t), "k"); err != nil {
		t.Fatal(err)
	}
	e := s.states.Acquire("k", false)
	defer s.states.Release(e)
	s.Set(Config{Config: limit.Config{Rate: 1, Burst: 10}})
	s.catchUp(&e.State)
	if got := e.State.told.BucketRate(); got != 1 {
		t.Errorf("bucket rate %v after Set(Rate 1), want 1", float64(got))
	}
}

// A scope hands a request a slot, holds it until released, and refuses
// a request that must not wait for one, as a *Refusal naming the scope
// and the key; released, the slot goes to the next.
func TestSlotIsHeldUntilReleased(t *testing.T) {
	s := New("cap", false, false, time.Minute, Config{Config: limit.Config{MaxConcurrent: 1, FailFast: true}}, new(Shared))
	g, err := s.Admit(request(t), "k")
	if err != nil || !g.Slot.Held() {
		t.Fatalf("first: %+v, %v; want a slot", g, err)
	}
	_, err = s.Admit(request(t), "k")
	var r *Refusal
	if !errors.As(err, &r) || r.Scope != "cap" || r.Key != "k" || r.Reason != "fail-fast" {
		t.Fatalf("second: %v, want a fail-fast refusal of cap, k", err)
	}
	var held []string
	s.Holding(func(key string, holds, slots, waiting, queued int) { held = append(held, key) })
	if len(held) != 1 {
		t.Errorf("holding %v, want k", held)
	}
	g.Slot.Release()
	if g, err := s.Admit(request(t), "k"); err != nil || !g.Slot.Held() {
		t.Fatalf("after the release: %+v, %v; want the slot", g, err)
	} else {
		g.Slot.Release()
	}
}

// TrySlot hands a request a free slot as Admit would, held until
// released, and reports false, holding nothing, when the cap is taken.
func TestTrySlotTakesAFreeSlotOnly(t *testing.T) {
	s := New("cap", false, false, time.Minute, Config{Config: limit.Config{MaxConcurrent: 1}}, new(Shared))
	slot, ok := s.TrySlot("k")
	if !ok || !slot.Held() {
		t.Fatalf("first: %+v, %v; want a slot", slot, ok)
	}
	if other, ok := s.TrySlot("k"); ok || other.Held() {
		t.Fatalf("second, the cap taken: %+v, %v; want none", other, ok)
	}
	var slots int
	s.Holding(func(key string, holds, n, waiting, queued int) { slots += n })
	if slots != 1 {
		t.Errorf("%d slots held, want 1", slots)
	}
	slot.Release()
	if slot, ok := s.TrySlot("k"); !ok {
		t.Error("after the release: no slot")
	} else {
		slot.Release()
	}
}

// The refusal that makes a key's pace is taught to it before the pace is
// published: a request the new pace let go, answered in the same
// instant, is learned after it. A shedder's first refusal, with nothing
// let through before it, then starts its trial (learn.Trial) rather than
// being read after two successes of that instant, as a rate's (which
// slowed the key for minutes in about one run of a shedder in 1,500).
func TestArmingRefusalIsTaughtBeforeThePaceIsPublished(t *testing.T) {
	s := New("learned", true, false, time.Minute, Config{Config: limit.Config{Learned: true}}, new(Shared))
	g, err := s.Admit(request(t), "k")
	if err != nil || !g.Ticket.Held() {
		t.Fatalf("Admit = %+v, %v; want a ticket of the key's slow start", g, err)
	}
	e := s.states.Acquire("k", false)
	defer s.states.Release(e)
	var trials, published int
	s.Trace = func(format string, args ...any) {
		if strings.HasPrefix(format, "trial:") {
			trials++
			if e.State.adapt.Load() != nil {
				published++
			}
		}
	}
	refused := Answer{Resp: &http.Response{StatusCode: 429, Header: http.Header{}}, Refused: true}
	s.Untracked(request(t), "k", refused, g.Ticket, time.Now())
	if trials != 1 || published != 0 || e.State.adapt.Load() == nil {
		t.Errorf("%d trials started, %d of them with the pace already published, pace published after: %v; want 1, 0, true",
			trials, published, e.State.adapt.Load() != nil)
	}
}
