package providers

import (
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jarcoal/httpmock"
	"go.uber.org/goleak"

	"github.com/ratewise/ratewise"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// arrivals is a fake API answering 200 to every request: a fresh httpmock
// transport that notes when each request reaches it.
type arrivals struct {
	mu    sync.Mutex
	times []time.Time // guarded by mu
}

func (a *arrivals) mock() *httpmock.MockTransport {
	mt := httpmock.NewMockTransport()
	mt.RegisterNoResponder(func(req *http.Request) (*http.Response, error) {
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		return httpmock.NewStringResponse(http.StatusOK, "ok"), nil
	})
	return mt
}

// get sends one GET through tr and closes the response's body.
func get(t *testing.T, tr http.RoundTripper) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://api.example.com/items", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
}

// Every published limit lets no more than its number through in any window.
func TestLimitsHoldTheirWindows(t *testing.T) {
	for _, tt := range []struct {
		limit  ratewise.Limit
		n      int
		window time.Duration
	}{
		{TMDB(), 40, 10 * time.Second},
		{MusicBrainz(), 1, time.Second},
		{Fanart(false), 10, time.Second},
		{Fanart(true), 20, time.Second},
		{TheAudioDB(), 30, time.Minute},
	} {
		t.Run(tt.limit.Name, func(t *testing.T) {
			if err := tt.limit.Validate(); err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				var api arrivals
				tr := ratewise.New(api.mock(), ratewise.WithLimit(tt.limit))
				for range 3 * tt.n {
					get(t, tr)
				}
				times := api.times
				for i := range times {
					in := 0
					for _, at := range times[i:] {
						if at.Sub(times[i]) < tt.window {
							in++
						}
					}
					if in > tt.n {
						t.Fatalf("%d requests within %v from request %d, want at most %d", in, tt.window, i, tt.n)
					}
				}
				// And it is not much slower than the limit: its sustained rate
				// is at least 7/8 of it, so 3n calls take at most 3.5 windows.
				if last := times[len(times)-1].Sub(times[0]); last > 7*tt.window/2 {
					t.Errorf("3×%d calls took %v, want at most 3.5×%v", tt.n, last, tt.window)
				}
			})
		})
	}
	if l := GitHub(); !l.Adaptive || l.MaxConcurrent != 100 || l.Validate() != nil {
		t.Errorf("GitHub() = %+v", l)
	}
}

// Each limit's Name, which labels its scope in statuses and errors, is
// its function's name in lower case, as the package doc says.
func TestLimitNames(t *testing.T) {
	for _, tt := range []struct {
		give ratewise.Limit
		want string
	}{
		{TMDB(), "tmdb"},
		{MusicBrainz(), "musicbrainz"},
		{Fanart(false), "fanart"},
		{Fanart(true), "fanart"},
		{TheAudioDB(), "theaudiodb"},
		{GitHub(), "github"},
	} {
		if tt.give.Name != tt.want {
			t.Errorf("Name = %q, want %q", tt.give.Name, tt.want)
		}
	}
}
