package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// Admit answers as the MemoryStore, the reference, does, step by step: a
// closed breaker with its failures, the token taken when there now and
// not when not; a pause that keeps the token; an open breaker that keeps
// it too; then, its cooldown over, the probe granted to one asker alone.
func TestAdmitAnswersAsTheReference(t *testing.T) {
	srv := redistest.Start(t)
	rs, _ := newStore(t, srv, Options{Prefix: "admit:"})
	mem := ratewise.NewMemoryStore()
	rules := ratewise.BreakerPolicy{ConsecutiveFailures: 2, Cooldown: 300 * time.Millisecond}.Rules()
	ask := &store.AdmitAsk{Breaker: "h", Rules: &rules, Pause: "h", Bucket: "api:h", N: 1, Rate: 1, Burst: 1}
	ctx := context.Background()
	type step struct {
		name string
		do   func(s store.Store)
		// what the answer must say: the breaker's state and whether it is
		// the probe, whether the key is paused, whether the bucket was
		// asked and its token taken.
		state               store.State
		probe, paused, took bool
		taken               bool
		failures            int
	}
	steps := []step{
		{name: "fresh: taken", state: store.Closed, took: true, taken: true},
		{name: "no token left: asked, not taken", state: store.Closed, took: true},
		{name: "a failure counted", do: func(s store.Store) {
			_, _ = s.BreakerFailed(ctx, "h", false, store.Cause{}, &rules)
		}, state: store.Closed, took: true, failures: 1},
		{name: "paused: the bucket is not asked", do: func(s store.Store) {
			_ = s.Pause(ctx, "h", time.Now().Add(time.Hour))
		}, state: store.Closed, paused: true, failures: 1},
	}
	for _, s := range []struct {
		name  string
		store store.Admitter
	}{{"memory", mem}, {"redis", rs}} {
		for _, st := range steps {
			if st.do != nil {
				st.do(s.store)
			}
			a, err := s.store.Admit(ctx, ask)
			if err != nil {
				t.Fatalf("%s, %s: %v", s.name, st.name, err)
			}
			if a.Breaker.State != st.state || a.Breaker.Probe != st.probe || a.Breaker.Failures != st.failures ||
				a.PausedUntil.After(time.Now()) != st.paused || a.Took != st.took || (a.Took && a.Wait == 0) != st.taken {
				t.Errorf("%s, %s: %+v, want state %v probe %v failures %d paused %v asked %v taken %v",
					s.name, st.name, a, st.state, st.probe, st.failures, st.paused, st.took, st.taken)
			}
		}
	}

	// An open breaker keeps the token; its cooldown over, one asker is
	// granted the probe and the bucket's token, the next neither.
	for _, s := range []struct {
		name  string
		store store.Admitter
	}{{"memory", mem}, {"redis", rs}} {
		ask := &store.AdmitAsk{Breaker: "o", Rules: &rules, Bucket: "api:o", N: 1, Rate: 1000, Burst: 10}
		_, _ = s.store.BreakerFailed(ctx, "o", false, store.Cause{}, &rules)
		_, _ = s.store.BreakerFailed(ctx, "o", false, store.Cause{}, &rules)
		if a, _ := s.store.Admit(ctx, ask); a.Breaker.State != store.Open || a.Took {
			t.Errorf("%s, open: %+v, want open and the bucket not asked", s.name, a)
		}
		time.Sleep(350 * time.Millisecond) // the cooldown: a real Redis keeps real time
		first, _ := s.store.Admit(ctx, ask)
		second, _ := s.store.Admit(ctx, ask)
		if !first.Breaker.Probe || first.Breaker.ProbeID == 0 || !first.Took || first.Wait != 0 {
			t.Errorf("%s, cooldown over: %+v, want the probe granted and its token taken", s.name, first)
		}
		if second.Breaker.State != store.HalfOpen || second.Breaker.Probe || second.Took {
			t.Errorf("%s, while the probe is out: %+v, want half-open, no probe, no token", s.name, second)
		}
	}
}

// A Ring, as a Redis Cluster, keeps the state of different keys apart: an
// attempt whose questions name two keys (a Global scope's bucket beside a
// host's pause) is not asked together, and the transport asks one by one.
func TestAdmitRefusesQuestionsOfTwoKeysOnARing(t *testing.T) {
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	rs := New(ring, Options{})
	ask := &store.AdmitAsk{Pause: "h", Bucket: store.ScopeKey("all", ""), N: 1, Rate: 1, Burst: 1}
	if _, err := rs.Admit(context.Background(), ask); err != store.ErrCannotCombine {
		t.Errorf("a Ring: err = %v, want ErrCannotCombine", err)
	}
}

// BenchmarkAdmit is one Admit (a pause and a bucket asked together)
// against one Take and one PING, each a round trip to Redis on loopback.
func BenchmarkAdmit(b *testing.B) {
	srv := redistest.Start(b)
	client := srv.Client()
	defer client.Close()
	rs := New(client, Options{})
	ctx := context.Background()
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("take", func(b *testing.B) {
		for b.Loop() {
			if _, err := rs.Take(ctx, "bench", 1, 1e9, 1<<30, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("admit", func(b *testing.B) {
		ask := &store.AdmitAsk{Pause: "bench", Bucket: "bench", N: 1, Rate: 1e9, Burst: 1 << 30}
		for b.Loop() {
			if _, err := rs.Admit(ctx, ask); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Admit asks the learned pace as Learn does, with the rest: a key that
// learned nothing is answered unpaced and writes nothing; once a refusal
// taught it, the answer is a turn of its pace; a paused key takes no turn.
func TestAdmitTakesTheLearnedTurn(t *testing.T) {
	srv := redistest.Start(t)
	rs, client := newStore(t, srv, Options{Prefix: "admit-learned:"})
	ctx := context.Background()
	for _, s := range []struct {
		name  string
		store interface {
			store.Admitter
			store.Learned
		}
	}{{"memory", ratewise.NewMemoryStore()}, {"redis", rs}} {
		ask := &store.AdmitAsk{Pause: "h", Learned: "learned:h", Learn: store.LearnAsk{Take: true, MaxWait: time.Second}}
		a, err := s.store.Admit(ctx, ask)
		if err != nil || !a.Learnt || a.Learned.Paced || a.Learned.Took {
			t.Fatalf("%s, nothing learned: %+v, %v; want the learned pace asked and unpaced", s.name, a, err)
		}
		if s.name == "redis" {
			if n, _ := client.Exists(ctx, rs.learnedKey("learned:h")).Result(); n != 0 {
				t.Errorf("redis kept a hash for a key that learned nothing")
			}
		}
		refused := &store.LearnAsk{Outcomes: []store.Outcome{{Kind: store.Refused}}}
		if _, err := s.store.Learn(ctx, "learned:h", refused); err != nil {
			t.Fatal(err)
		}
		a, err = s.store.Admit(ctx, ask)
		if err != nil || !a.Learnt || !a.Learned.Paced || !a.Learned.Took || a.Learned.Seq != 1 || a.Learned.Rate <= 0 {
			t.Errorf("%s, refused once: %+v, %v; want turn 1 of a learned pace", s.name, a, err)
		}
		_ = s.store.Pause(ctx, "h", time.Now().Add(time.Hour))
		if a, _ = s.store.Admit(ctx, ask); a.Learnt {
			t.Errorf("%s, paused: %+v, want no turn taken", s.name, a)
		}
	}
}
