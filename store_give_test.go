package ratewise

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
)

func (f failingStore) Give(context.Context, string, int, rate.Limit, int) error { return f.err() }

// A token given back is there for the next taker, and a bucket never holds
// more than its burst: what the admission middleware relies on to take
// nothing from a scope when a later one refuses.
func TestMemoryStoreGiveReturnsTokensUpToBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore()
		for range 2 {
			if w, err := s.Take(ctx, "k", 1, 1, 2, 0); w != 0 || err != nil {
				t.Fatalf("Take of the burst = %v, %v; want at once", w, err)
			}
		}
		if w, _ := s.Take(ctx, "k", 1, 1, 2, 0); w != time.Second {
			t.Fatalf("Take of an empty bucket = %v, want 1s and nothing taken", w)
		}
		if err := s.Give(ctx, "k", 1, 1, 2); err != nil {
			t.Fatal(err)
		}
		if tokens, _ := s.Tokens(ctx, "k", 1, 2); tokens != 1 {
			t.Fatalf("Tokens after giving one back = %v, want 1", tokens)
		}
		if w, _ := s.Take(ctx, "k", 1, 1, 2, 0); w != 0 {
			t.Fatalf("Take after Give = %v, want the token given back, at once", w)
		}
		// Giving more than was taken fills the bucket, no more.
		_ = s.Give(ctx, "k", 5, 1, 2)
		if tokens, _ := s.Tokens(ctx, "k", 1, 2); tokens != 2 {
			t.Errorf("Tokens after giving back too many = %v, want the burst, 2", tokens)
		}
		// A bucket never used is full: there is nothing to give back to.
		_ = s.Give(ctx, "never", 1, 1, 2)
		if tokens, _ := s.Tokens(ctx, "never", 1, 2); tokens != 2 {
			t.Errorf("Tokens of a bucket never used after Give = %v, want 2", tokens)
		}
	})
}

// TakeCounted takes as Take does and says what is left, reserved tokens
// counting below zero.
func TestMemoryStoreTakeCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := NewMemoryStore()
		tests := []struct {
			maxWait    time.Duration
			wantWait   time.Duration
			wantTokens float64
		}{
			{0, 0, 1},
			{0, 0, 0},
			{0, 500 * time.Millisecond, 0}, // refused: nothing taken
			{time.Second, 500 * time.Millisecond, -1}, // reserved
			{500 * time.Millisecond, time.Second, -1}, // too far: nothing taken
			{2 * time.Second, time.Second, -2},        // reserved behind the first
			{0, 1500 * time.Millisecond, -2},          // refused again
		}
		for i, tt := range tests {
			wait, tokens, err := s.TakeCounted(ctx, "k", 1, 2, 2, tt.maxWait)
			if err != nil || wait != tt.wantWait || tokens != tt.wantTokens {
				t.Errorf("take %d (maxWait %v) = %v, %v tokens, %v; want %v, %v", i, tt.maxWait, wait, tokens, err, tt.wantWait, tt.wantTokens)
			}
		}
	})
}
