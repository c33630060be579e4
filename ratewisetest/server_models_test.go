package ratewisetest

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The models over loopback, in real time: the in-process tests hold their
// exact behaviour in fake time; these check that the Server keeps them too.

func TestServerWindowModels(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want []result // statuses and the headers named; "" means absent
	}{
		{
			name: "fixed window from the first request",
			give: Config{Model: FixedWindowFromFirst, Limit: 2, Window: time.Hour, PublishHeaders: true},
			want: []result{
				{status: 200, header: http.Header{"X-Ratelimit-Limit": {"2"}, "X-Ratelimit-Remaining": {"1"}, "X-Ratelimit-Reset": {"3600"}}},
				{status: 200, header: http.Header{"X-Ratelimit-Remaining": {"0"}}},
				{status: 429, header: http.Header{"X-Ratelimit-Remaining": {"0"}, "Retry-After": {"3600"}}},
			},
		},
		{
			// Whenever the hour turns, the previous window's one request
			// still counts nearly in full.
			name: "sliding window sends its whole window",
			give: Config{Model: SlidingWindow, Limit: 1, Window: time.Hour, RetryAfter: RetryAfterWindow},
			want: []result{
				{status: 200, header: http.Header{"Retry-After": {""}}},
				{status: 429, header: http.Header{"Retry-After": {"3600"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, tt.give)
			for i, w := range tt.want {
				r := get(t, s.Client(), s.URL, "", "")
				if r.status != w.status {
					t.Errorf("request %d: status = %d, want %d", i+1, r.status, w.status)
				}
				for name, v := range w.header {
					if got := r.header.Get(name); got != v[0] {
						t.Errorf("request %d: %s = %q, want %q", i+1, name, got, v[0])
					}
				}
			}
		})
	}
}

func TestServerLeakyBucketQueuesAndRefusesLikeNginx(t *testing.T) {
	// burst=1 at 4r/s, refusing with nginx's 503 page: of three at once,
	// one is answered at once, one 250ms later, one refused at once.
	s := newServer(t, Config{Model: LeakyBucket, Rate: 4, Burst: 1, RefusalStatus: 503, HTMLRefusal: true})
	type answer struct {
		status int
		took   time.Duration
		body   string
	}
	var (
		mu  sync.Mutex
		got []answer
		wg  sync.WaitGroup
	)
	start := time.Now()
	for range 3 {
		wg.Go(func() {
			resp, err := s.Client().Get(s.URL)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got = append(got, answer{resp.StatusCode, time.Since(start), string(body)})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b answer) int { return int(a.took - b.took) })
	if len(got) != 3 {
		t.Fatalf("%d answers, want 3", len(got))
	}
	statuses := []int{got[0].status, got[1].status, got[2].status}
	slices.Sort(statuses)
	if want := []int{200, 200, 503}; !slices.Equal(statuses, want) {
		t.Errorf("statuses = %v, want %v", statuses, want)
	}
	// Real time: only the queued answer's lower bound is certain.
	if last := got[2]; last.status != 200 || last.took < 250*time.Millisecond {
		t.Errorf("last answer = %d after %v, want the queued 200 after 250ms or more", last.status, last.took)
	}
	for _, a := range got {
		if a.status == 503 && !strings.Contains(a.body, "<h1>503 Service Unavailable</h1>") {
			t.Errorf("503 body = %q, want the HTML page", a.body)
		}
	}
	if got, want := s.Stats(), (Stats{Received: 3, Admitted: 2, Limited: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestServerConcurrencyCap(t *testing.T) {
	// A cap of 1 around a handler that holds its request until told: a
	// second request while it is held is refused at once; once it is
	// answered, the next is admitted.
	entered, release := make(chan struct{}), make(chan struct{})
	s := newServer(t, Config{Model: ConcurrencyCap, Limit: 1, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
			<-release
		default: // the last request: nobody waits for it
		}
		_, _ = io.WriteString(w, "ok")
	})})
	first := make(chan result, 1)
	go func() {
		resp, err := s.Client().Get(s.URL)
		if err != nil {
			t.Error(err)
			first <- result{}
			return
		}
		resp.Body.Close()
		first <- result{status: resp.StatusCode}
	}()
	<-entered
	if r := get(t, s.Client(), s.URL, "", ""); r.status != 429 || r.header.Get("Retry-After") != "" || r.body != limitedBody {
		t.Errorf("while the first is served: %d, Retry-After %q, %q; want 429 with no Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	close(release)
	if r := <-first; r.status != 200 {
		t.Errorf("the first = %d, want 200", r.status)
	}
	if r := get(t, s.Client(), s.URL, "", ""); r.status != 200 {
		t.Errorf("after the first was answered: %d, want 200", r.status)
	}
	if got, want := s.Stats(), (Stats{Received: 3, Admitted: 2, Limited: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

func TestServerLoadShedRefusesAsTheBucketDoes(t *testing.T) {
	// The same seed refuses the same requests on loopback as in process.
	cfg := Config{Model: LoadShed, Shed: 0.5, RefusalStatus: 503, Seed: 7}
	got := statuses(getN(t, newServer(t, cfg), 40))
	if want := shedStatuses(t, cfg, 40); !slices.Equal(got, want) {
		t.Errorf("statuses = %v, want those of a Bucket of the same seed, %v", got, want)
	}
	if n := count(got, 503); n == 0 || n == 40 {
		t.Errorf("%d of 40 refused, want some", n)
	}
}
