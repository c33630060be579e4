package ratewise

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/store"
	"golang.org/x/time/rate"
)

// failingStore is a store whose every call fails, closed or not.
type failingStore struct{ closed bool }

func (f failingStore) err() error {
	err := errors.New("connection refused")
	if f.closed {
		return errors.Join(ErrStoreUnavailable, err)
	}
	return err
}

func (f failingStore) Take(context.Context, string, int, rate.Limit, int, time.Duration) (time.Duration, error) {
	return 0, f.err()
}

func (f failingStore) Tokens(context.Context, string, rate.Limit, int) (float64, error) {
	return 0, f.err()
}

func (f failingStore) Pause(context.Context, string, time.Time) error { return f.err() }

func (f failingStore) PausedUntil(context.Context, string) (time.Time, error) {
	return time.Time{}, f.err()
}

func (f failingStore) BreakerAdmit(context.Context, string, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, f.err()
}

func (f failingStore) BreakerRead(context.Context, string, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, f.err()
}

func (f failingStore) BreakerReleaseProbe(context.Context, string, uint64) error { return f.err() }

func (f failingStore) BreakerFailed(context.Context, string, bool, store.Cause, *store.Rules) (store.Breaker, error) {
	return store.Breaker{}, f.err()
}

func (f failingStore) BreakerSucceeded(context.Context, string, bool, *store.Rules) error {
	return f.err()
}

func (f failingStore) BreakerTripped(context.Context, string, store.Trip, *store.Rules) error {
	return f.err()
}

func TestStoreDownFallsBackToLocalState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := failingStore{}
		rec := &recording{base: newScript(answer(200)).mock()}
		tr := New(rec, WithLimit(Limit{Rate: 10, Burst: 1, Store: down}), WithPause(PausePolicy{Store: down}),
			WithBreaker(BreakerPolicy{Store: down}))
		for range 5 {
			if status, err := callOnce(t, tr, context.Background()); status != 200 {
				t.Fatalf("with the mem down: %d, %v; want the call to go on local state", status, err)
			}
		}
		// The local bucket stands in: still 10/s.
		if last := rec.times[4].Sub(rec.times[0]); last != 400*time.Millisecond {
			t.Errorf("5 calls took %v, want the local 10/s", last)
		}
	})
}

func TestStoreDownFailsClosed(t *testing.T) {
	closed := failingStore{closed: true}
	for _, tt := range []struct {
		name string
		opt  Option
		want any
	}{
		{"limit", WithLimit(Limit{Rate: 10, Store: closed}), new(*ClientLimitError)},
		{"pause", WithPause(PausePolicy{Store: closed}), new(*ClientLimitError)},
		{"breaker", WithBreaker(BreakerPolicy{Store: closed}), new(*CircuitOpenError)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScript(answer(200))
			tr := New(s.mock(), tt.opt)
			_, err := callOnce(t, tr, context.Background())
			if !errors.Is(err, ErrStoreUnavailable) || !errors.As(err, tt.want) || s.calls() != 0 {
				t.Errorf("err = %v, %d sent; want a %T matching ErrStoreUnavailable and nothing sent", err, s.calls(), tt.want)
			}
			if !strings.Contains(err.Error(), "connection refused") {
				t.Errorf("err = %v, want the mem's cause", err)
			}
		})
	}
}

func TestLimitStoreValidation(t *testing.T) {
	mem := NewMemoryStore()
	for _, l := range []Limit{
		{Store: mem},
		{Store: mem, Rate: 1, MinSpacing: time.Second},
		{Store: mem, Rate: 1, Burst: 5, Reserve: 1},
		{Store: mem, Rate: 1, Adaptive: true},
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "has a Store") {
			t.Errorf("Validate(%+v) = %v", l, err)
		}
	}
	if err := (Limit{Store: mem, Rate: 1, Burst: 5, MaxConcurrent: 2}).Validate(); err != nil {
		t.Errorf("a valid shared limit: %v", err)
	}
}
