package ratewise

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratewise/ratewise/internal/limit"
	"github.com/ratewise/ratewise/ratewisetest"
)

// threePer10s is a told window of 3 requests per 10 seconds; a start
// leaves it after 10 s and the margin.
var threePer10s = Limit{Name: "window", Burst: 3, Window: 10 * time.Second}

const aWindowOn = 10*time.Second + limit.WindowMargin

// callAt makes one call through tr at the fake time start+at and returns
// its error; the server's answer is read and closed.
func callAt(tr http.RoundTripper, ctx context.Context, start time.Time, at time.Duration) error {
	time.Sleep(time.Until(start.Add(at)))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
	resp, err := tr.RoundTrip(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	return err
}

// callsAt makes one call through tr at each of the fake times start+at,
// in turn, and stops the test at the first error.
func callsAt(t *testing.T, tr http.RoundTripper, start time.Time, ats ...time.Duration) {
	t.Helper()
	for _, at := range ats {
		if err := callAt(tr, context.Background(), start, at); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWindowSendsItsQuotaThenWaitsAWindow: seven requests at once through
// a window of 3 per 10 s go 3 at once, 3 ten seconds on, and the last
// twenty seconds on: the quickest a server's window of the same size lets
// them through.
func TestWindowSendsItsQuotaThenWaitsAWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(threePer10s))
		start := time.Now()
		var wg sync.WaitGroup
		for range 7 {
			wg.Go(func() {
				if err := callAt(tr, context.Background(), start, 0); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		at := s.offsets(start)
		slices.Sort(at)
		want := []time.Duration{0, 0, 0, aWindowOn, aWindowOn, aWindowOn, 2 * aWindowOn}
		if !slices.Equal(at, want) {
			t.Errorf("requests sent at %v, want %v", at, want)
		}
	})
}

// TestWindowHoldsAnyWindowToItsBurst: the window slides with the
// requests, so that no span of 10 s holds more than 3 starts wherever a
// server begins its own window: at 10 s the start at 0 is about to leave
// it, and a request at 11 s waits for the two at 9 s to leave at 19 s.
func TestWindowHoldsAnyWindowToItsBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(threePer10s))
		start := time.Now()
		callsAt(t, tr, start, 0, 9*time.Second, 9*time.Second, 10*time.Second, 11*time.Second)
		want := []time.Duration{0, 9 * time.Second, 9 * time.Second, aWindowOn, 9*time.Second + aWindowOn}
		if at := s.offsets(start); !slices.Equal(at, want) {
			t.Errorf("requests sent at %v, want %v", at, want)
		}
	})
}

// TestWindowGivesBackACancelledTurn: a request that gives up its wait
// frees its turn for the next one, which goes when the window reopens
// rather than a window later.
func TestWindowGivesBackACancelledTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(200))
		tr := New(s.mock(), WithLimit(threePer10s))
		start := time.Now()
		callsAt(t, tr, start, 0, time.Second, 2*time.Second)
		// The fourth would go at 10 s, when the start at 0 leaves the
		// window, but gives up at 4 s.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := callAt(tr, ctx, start, 3*time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait cut short by its context: err = %v, want the deadline", err)
		}
		callsAt(t, tr, start, 5*time.Second)
		want := []time.Duration{0, time.Second, 2 * time.Second, aWindowOn}
		if at := s.offsets(start); !slices.Equal(at, want) {
			t.Errorf("requests sent at %v, want %v: the last at 10s, the turn the cancelled one gave back, not at 11s", at, want)
		}
	})
}

// TestWindowIsNeverRefusedByAServerWindow: told the server's window, a
// batch is never refused, whether the server aligns its windows to the
// clock (here 3.7 s before the first request) or opens them at a first
// request, and takes the least time the server allows.
func TestWindowIsNeverRefusedByAServerWindow(t *testing.T) {
	for _, model := range []ratewisetest.Model{ratewisetest.FixedWindow, ratewisetest.FixedWindowFromFirst} {
		t.Run(model.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := ratewisetest.NewBucket(ratewisetest.Config{Model: model, Limit: 30, Window: 10 * time.Second})
				time.Sleep(3700 * time.Millisecond)
				tr := New(srv, WithLimit(Limit{Burst: 30, Window: 10 * time.Second}))
				wall, failed := goodput(tr, 10, 120)
				// Four windows of 30: the ideal is 30 s, and the margin
				// after each window.
				if st := srv.Stats(); st.Limited != 0 || failed != 0 || wall != 3*aWindowOn {
					t.Errorf("120 calls took %v, %d refused, %d failed; want %v, none refused or failed", wall, st.Limited, failed, 3*aWindowOn)
				}
			})
		})
	}
}

// TestWindowStatus: KeyStatus says the window, what one admits and how
// many more may start now; the learned scope follows it, learning
// nothing while the server refuses nothing.
func TestWindowStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(newScript(answer(200)).mock(), WithLimit(threePer10s))
		callsAt(t, tr, time.Now(), 0)
		scopes := tr.KeyStatus("api.test").Scopes
		if len(scopes) != 2 || scopes[1].Name != LearnedScope || scopes[1].LearnedRate != 0 {
			t.Fatalf("scopes %+v, want the told window, then the learned scope with nothing learned", scopes)
		}
		st := scopes[0]
		b, _ := json.Marshal(st)
		if st.Window != 10*time.Second || st.Burst != 3 || st.Tokens != 2 || !strings.Contains(string(b), `"window_seconds":10`) {
			t.Errorf("status %s, want a window of 10 s admitting 3, 2 more now", b)
		}
		time.Sleep(aWindowOn)
		if st := tr.KeyStatus("api.test").Scopes[0]; st.Tokens != 3 {
			t.Errorf("a window on: %v may start, want 3", st.Tokens)
		}
	})
}

func TestWindowValidate(t *testing.T) {
	for _, tt := range []struct {
		give Limit
		want string
	}{
		{Limit{Window: -time.Second, Burst: 1}, "Window (-1s) must not be negative"},
		{Limit{Window: time.Second}, "it needs Burst (0)"},
		{Limit{Window: time.Second, Burst: limit.MaxWindowBurst + 1}, "from 1 to 65536"},
		{Limit{Window: time.Second, Burst: 5, Rate: 1}, "takes no Rate (1)"},
		{Limit{Window: time.Second, Burst: 5, Adaptive: true}, "Adaptive (true)"},
	} {
		if err := tt.give.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate(%+v) = %v, want it to say %q", tt.give, err, tt.want)
		}
	}
	if err := threePer10s.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", threePer10s, err)
	}
}
