package ratewise

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// The former names keep working as the names that replaced them.
func TestFormerNamesWorkAsTheNewOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(answer(429, "Retry-After", "30"), answer(200))
		tr := New(s.mock(), WithRetry(RetryPolicy{MaxAttempts: 1}), WithCooldown(CooldownPolicy{MaxPause: time.Minute}))
		if tr.gate == nil || tr.gate.MaxPause != time.Minute {
			t.Fatal("WithCooldown did not configure the pause gate")
		}
		_, _ = callOnce(t, tr, context.Background())
		if old, now := tr.LimitStatus(host), tr.KeyStatus(host); old.PausedFor != 30*time.Second || old.PausedFor != now.PausedFor {
			t.Errorf("LimitStatus paused for %v, KeyStatus %v; want both 30s", old.PausedFor, now.PausedFor)
		}
		if st := tr.Stats(); st.Requests != 1 || st.Calls != 1 {
			t.Errorf("Stats.Requests = %d, Calls = %d; want 1 each", st.Requests, st.Calls)
		}
		var le *LimitError
		err := error(&ClientLimitError{Scope: "s", Reason: "fail-fast"})
		if !errors.As(err, &le) || !errors.Is(err, ErrLimited) {
			t.Errorf("a *ClientLimitError is not a *LimitError matching ErrLimited: %v", err)
		}
		if DefaultCooldownSpread != DefaultPauseSpread || DefaultCooldownMaxPause != DefaultMaxPause || WaitCooldown != WaitPause {
			t.Error("a former constant differs from its new name")
		}
	})
}
