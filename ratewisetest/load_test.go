package ratewisetest

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestConcurrencyCapRefusesPastTheCapUntilOneIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A cap of 2, each held 1s: of three at once, the third is refused
		// at once; one more at 500ms is refused too; at 1.5s the two
		// places are free again, and a third at once is refused.
		const ms = time.Millisecond
		b := NewBucket(Config{Model: ConcurrencyCap, Limit: 2, ServiceTime: time.Second})
		got := sendAt(t, b, 0, 0, 0, 500*ms, 1500*ms, 1500*ms, 1500*ms)
		want := []answer{
			{0, 0, 429}, {0, 1000 * ms, 200}, {0, 1000 * ms, 200},
			{500 * ms, 500 * ms, 429},
			{1500 * ms, 1500 * ms, 429}, {1500 * ms, 2500 * ms, 200}, {1500 * ms, 2500 * ms, 200},
		}
		if !slices.Equal(got, want) {
			t.Errorf("answers (sent, answered, status) = %v, want %v", got, want)
		}
		if got, want := b.Stats(), (Stats{Received: 7, Admitted: 4, Limited: 3}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	})
}

// holdPlaces sends n requests to rt that are being served when it
// returns, and returns a func that waits for their answers.
func holdPlaces(t *testing.T, rt http.RoundTripper, n int) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if status, _, _, err := roundTrip(t, rt, context.Background()); err != nil || status != http.StatusOK {
				t.Errorf("a request holding a place = %d, %v; want 200", status, err)
			}
		})
	}
	synctest.Wait() // every one is in its service time
	return wg.Wait
}

func TestConcurrencyCapRefusalHasNoHint(t *testing.T) {
	tests := []struct {
		name           string
		give           Config
		wantStatus     int
		wantRetryAfter string
	}{
		{name: "default", give: Config{}, wantStatus: 429},
		{name: "503", give: Config{RefusalStatus: 503}, wantStatus: 503},
		{name: "a Retry-After asked for", give: Config{RefusalRetryAfter: 1500 * time.Millisecond}, wantStatus: 429, wantRetryAfter: "2"},
		// The bubble's clock starts at midnight UTC on 1 January 2000.
		{
			name:       "a Retry-After asked for as a date",
			give:       Config{RefusalRetryAfter: time.Minute, RetryAfter: RetryAfterHTTPDate},
			wantStatus: 429, wantRetryAfter: "Sat, 01 Jan 2000 00:01:00 GMT",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tt.give
				cfg.Model, cfg.Limit, cfg.ServiceTime = ConcurrencyCap, 1, time.Second
				b := NewBucket(cfg)
				wait := holdPlaces(t, b, 1)
				status, h, body, err := roundTrip(t, b, context.Background())
				if err != nil || status != tt.wantStatus || body != limitedBody {
					t.Errorf("past the cap = %d %q, %v; want %d %q", status, body, err, tt.wantStatus, limitedBody)
				}
				if got := h.Get("Retry-After"); got != tt.wantRetryAfter {
					t.Errorf("Retry-After = %q, want %q", got, tt.wantRetryAfter)
				}
				for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy"} {
					if v, ok := h[name]; ok {
						t.Errorf("refusal header %s = %q, want none", name, v)
					}
				}
				wait()
			})
		})
	}
}

func TestConcurrencyCapFreesAnAbandonedPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(Config{Model: ConcurrencyCap, Limit: 1, ServiceTime: time.Second})
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, _, _, err := roundTrip(t, b, ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("cancelled while served: err = %v, want the context's", err)
		}
		if status, _, _, err := roundTrip(t, b, context.Background()); err != nil || status != 200 {
			t.Errorf("next at 300ms = %d, %v; want 200: the abandoned one gave its place back", status, err)
		}
		if took := time.Since(start); took != 1300*time.Millisecond {
			t.Errorf("the one sent at 300ms was answered at %v, want 1.3s", took)
		}
		if got, want := b.Stats(), (Stats{Received: 2, Admitted: 1}); got != want {
			t.Errorf("Stats() = %+v, want %+v (the abandoned one only received)", got, want)
		}
	})
}

// TestConcurrencyCapIdealIsReached checks Ideal against the model: as
// many workers as the cap, each sending its next call as it gets an
// answer, take exactly Ideal, with no refusal.
func TestConcurrencyCapIdealIsReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{Model: ConcurrencyCap, Limit: 3, ServiceTime: 100 * time.Millisecond}
		b := NewBucket(cfg)
		const calls = 10
		next := make(chan struct{}, calls)
		for range calls {
			next <- struct{}{}
		}
		close(next)
		start := time.Now()
		var wg sync.WaitGroup
		for range cfg.Limit {
			wg.Go(func() {
				for range next {
					if status, _, _, err := roundTrip(t, b, context.Background()); err != nil || status != 200 {
						t.Errorf("call = %d, %v; want 200", status, err)
					}
				}
			})
		}
		wg.Wait()
		if got, want := time.Since(start), cfg.Ideal(calls); got != want || want != 400*time.Millisecond {
			t.Errorf("%d calls took %v, want Ideal() = %v = ⌈10/3⌉ × 100ms", calls, got, want)
		}
		if got := b.Stats().Limited; got != 0 {
			t.Errorf("%d refused, want none", got)
		}
	})
}

func TestServiceTimeDelaysOnlyTheAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A token bucket of 1 whose requests take 1s to serve: the first
		// is answered at 1s, the one refused beside it at once.
		const ms = time.Millisecond
		b := NewBucket(Config{Rate: 1, ServiceTime: time.Second})
		got := sendAt(t, b, 0, 0, 1500*ms)
		want := []answer{{0, 0, 429}, {0, 1000 * ms, 200}, {1500 * ms, 2500 * ms, 200}}
		if !slices.Equal(got, want) {
			t.Errorf("answers (sent, answered, status) = %v, want %v", got, want)
		}
	})
}

// shedStatuses sends n requests one at a time to a Bucket for cfg and
// returns their statuses.
func shedStatuses(t *testing.T, cfg Config, n int) []int {
	t.Helper()
	b := NewBucket(cfg)
	out := make([]int, n)
	for i := range out {
		status, h, _, err := roundTrip(t, b, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusOK {
			for _, name := range []string{"Retry-After", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit", "Ratelimit-Policy"} {
				if v, ok := h[name]; ok {
					t.Fatalf("refusal %d: header %s = %q, want none", i+1, name, v)
				}
			}
		}
		out[i] = status
	}
	if st := b.Stats(); st.Received != n || st.Admitted+st.Limited+st.Faults != n {
		t.Errorf("Stats() = %+v, want %d received, each admitted, limited or faulted", st, n)
	}
	return out
}

// count returns how many of statuses are want.
func count(statuses []int, want int) int {
	n := 0
	for _, s := range statuses {
		if s == want {
			n++
		}
	}
	return n
}

func TestLoadShedRefusesItsShareDeterministically(t *testing.T) {
	const n = 3000
	tests := []struct {
		name   string
		give   Config
		status int // of a refusal
	}{
		{name: "2 in 3, 429", give: Config{Model: LoadShed, Shed: 2.0 / 3}, status: 429},
		{name: "2 in 3, 503", give: Config{Model: LoadShed, Shed: 2.0 / 3, RefusalStatus: 503}, status: 503},
		{name: "1 in 10, seeded", give: Config{Model: LoadShed, Shed: 0.1, Seed: 42}, status: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shedStatuses(t, tt.give, n)
			refused := count(got, tt.status)
			if refused+count(got, 200) != n {
				t.Fatalf("statuses other than 200 and %d: %v", tt.status, got)
			}
			// Within 5% of n of the share: 3.7 standard deviations for 2/3.
			if want := tt.give.Shed * n; float64(refused) < want-0.05*n || float64(refused) > want+0.05*n {
				t.Errorf("%d of %d refused, want about %.0f", refused, n, want)
			}
			if again := shedStatuses(t, tt.give, n); !slices.Equal(again, got) {
				t.Error("a second server of the same seed refused other requests")
			}
			other := tt.give
			other.Seed++
			if slices.Equal(shedStatuses(t, other, 100), got[:100]) {
				t.Error("a server of another seed refused the same requests")
			}
		})
	}
}

func TestLoadShedWithoutAShareAdmitsAll(t *testing.T) {
	got := shedStatuses(t, Config{Model: LoadShed}, 100)
	if n := count(got, 200); n != 100 {
		t.Errorf("%d of 100 admitted, want all", n)
	}
}

func TestLoadShedIsTheSameDrawWhateverTheFaults(t *testing.T) {
	// Shedding draws from a stream of its own: adding faults to the
	// admitted requests does not change which are refused.
	cfg := Config{Model: LoadShed, Shed: 0.5}
	plain := shedStatuses(t, cfg, 200)
	cfg.FaultRate, cfg.Faults = 1, []Fault{Fault503}
	faulted := shedStatuses(t, cfg, 200)
	for i := range plain {
		if (plain[i] == 429) != (faulted[i] == 429) {
			t.Fatalf("request %d: %d without faults, %d with them; want the same refusals", i+1, plain[i], faulted[i])
		}
	}
}
