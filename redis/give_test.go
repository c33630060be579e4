package redis

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ratewise/ratewise/redis/redistest"
)

// A token given back to the Redis bucket is the next taker's, and the
// bucket never holds more than its burst: what the admission middleware
// relies on to take nothing from a shared scope when a later one refuses.
func TestGiveReturnsTokensToTheRedisBucket(t *testing.T) {
	srv := redistest.Start(t)
	s, client := newStore(t, srv, Options{Prefix: "t:"})
	ctx := context.Background()
	// 1 a minute: nothing refills while the test runs.
	const r, burst = 1.0 / 60, 2
	for i := range burst {
		if w, err := s.Take(ctx, "k", 1, r, burst, 0); w != 0 || err != nil {
			t.Fatalf("take %d of the burst: %v, %v", i+1, w, err)
		}
	}
	if w, _ := s.Take(ctx, "k", 1, r, burst, 0); w == 0 {
		t.Fatal("a take from the empty bucket succeeded")
	}
	if err := s.Give(ctx, "k", 1, r, burst); err != nil {
		t.Fatal(err)
	}
	if tokens, err := s.Tokens(ctx, "k", r, burst); err != nil || math.Abs(tokens-1) > 0.01 {
		t.Fatalf("Tokens after giving one back = %v, %v; want 1", tokens, err)
	}
	if w, err := s.Take(ctx, "k", 1, r, burst, 0); w != 0 || err != nil {
		t.Fatalf("take after Give = %v, %v; want the token given back, at once", w, err)
	}
	// Giving back more than was taken leaves a full bucket, whose key goes.
	if err := s.Give(ctx, "k", 5, r, burst); err != nil {
		t.Fatal(err)
	}
	if tokens, _ := s.Tokens(ctx, "k", r, burst); tokens != burst {
		t.Errorf("Tokens after giving back too many = %v, want the burst", tokens)
	}
	if n := client.Exists(ctx, "rate:t:bucket:{k}").Val(); n != 0 {
		t.Error("a full bucket's key outlived its Give")
	}
	if err := s.Give(ctx, "never", 1, r, burst); err != nil {
		t.Errorf("Give to a bucket never used: %v", err)
	}
}

// TakeCounted takes as Take does, and says in the same round trip what
// the bucket holds after.
func TestTakeCountedSaysWhatIsLeft(t *testing.T) {
	srv := redistest.Start(t)
	s, _ := newStore(t, srv, Options{})
	ctx := context.Background()
	const r, burst = 1.0 / 60, 3
	for i, want := range []float64{2, 1, 0} {
		w, tokens, err := s.TakeCounted(ctx, "k", 1, r, burst, 0)
		if err != nil || w != 0 || math.Abs(tokens-want) > 0.01 {
			t.Fatalf("take %d = %v, %v tokens, %v; want at once, %v left", i+1, w, tokens, err, want)
		}
	}
	w, tokens, err := s.TakeCounted(ctx, "k", 1, r, burst, 0)
	if err != nil || w < 59*time.Second || math.Abs(tokens) > 0.01 {
		t.Fatalf("take from the empty bucket = %v, %v tokens, %v; want refused with a wait of about a minute, 0 left", w, tokens, err)
	}
	w, tokens, err = s.TakeCounted(ctx, "k", 1, r, burst, 2*time.Minute)
	if err != nil || w < 59*time.Second || w > time.Minute || math.Abs(tokens+1) > 0.01 {
		t.Fatalf("a reserving take = %v, %v tokens, %v; want reserved a minute ahead, -1 left", w, tokens, err)
	}
}
