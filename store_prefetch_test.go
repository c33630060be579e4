package ratewise

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/ratewise/ratewise/store"
)

// staleAdmitStore is a MemoryStore whose first Admit, once it has its
// answer, runs during(): what another request did while the answer was
// on its way. It counts the turns asked for with Learn after that.
type staleAdmitStore struct {
	*MemoryStore
	once   atomic.Bool
	during func()
	after  atomic.Bool
	turns  atomic.Int32
}

func (s *staleAdmitStore) Admit(ctx context.Context, ask *store.AdmitAsk) (store.AdmitAnswer, error) {
	a, err := s.MemoryStore.Admit(ctx, ask)
	if !s.once.Swap(true) {
		s.during()
		s.after.Store(true)
	}
	return a, err
}

func (s *staleAdmitStore) Learn(ctx context.Context, key string, ask *store.LearnAsk) (store.LearnAnswer, error) {
	if ask.Take && s.after.Load() {
		s.turns.Add(1)
	}
	return s.MemoryStore.Learn(ctx, key, ask)
}

// TestStorePrefetchOlderThanTheFleetsPaceIsAskedAgain: a request whose
// store answered, with its breaker and its pause, that the fleet had
// learned nothing, while another request's refusal taught the fleet a
// pace, asks the store for its turn rather than going on the old answer.
// Gone unpaced, it also told the transport the key was unpaced again,
// and the first wave of 200 workers on a bucket of burst 10 was let
// through one by one, every one refused (200 refusals in about 1 run of
// 1500).
func TestStorePrefetchOlderThanTheFleetsPaceIsAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Refused, then let through: the store paces the key.
		base := newScript(answer(429, "Retry-After", "1"), answer(200), answer(200), answer(200)).mock()
		st := &staleAdmitStore{MemoryStore: NewMemoryStore()}
		tr := New(base, WithStore(st))
		get := func() {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		st.during = get
		get()
		if st.turns.Load() == 0 {
			t.Errorf("the request asked the store for no turn after the fleet's pace was learned: it went on the old answer")
		}
	})
}
