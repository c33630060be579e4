package ratewise

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// A Burst sizes a bucket (Rate) or a window (Window): with neither, and
// nothing else that limits, the Limit would let every request through,
// and Validate says so.
func TestLimitValidateRefusesABurstAlone(t *testing.T) {
	const want = "Burst (3) needs a Rate or a Window"
	for _, l := range []Limit{
		{Burst: 3},
		{Name: "api", Burst: 3, MaxWait: time.Second, MaxQueue: 10, FailFast: true, Key: Global, IdleTimeout: time.Minute},
		{Burst: 3, SpacingJitter: 0.5},
	} {
		if err := l.Validate(); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `Limit "`+l.Name+`"`) {
			t.Errorf("Validate(%+v) = %v, want it to say %q", l, err, want)
		}
	}
	// A Burst beside what limits without it is not refused: the Limit
	// still limits something.
	for _, l := range []Limit{
		{},
		{Rate: 2, Burst: 3},
		{Rate: rate.Inf, Burst: 3},
		{Window: time.Second, Burst: 3},
		{MinSpacing: time.Second, Burst: 3},
		{MaxConcurrent: 2, Burst: 3},
		{Adaptive: true, Burst: 3},
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", l, err)
		}
	}
}

// The refusal reaches every door a Limit comes in by.
func TestABurstAloneIsRefusedWhereverALimitIsGiven(t *testing.T) {
	const want = "Burst (3) needs a Rate or a Window"
	if tr, err := NewTransport(nil, WithLimit(Limit{Name: "api", Burst: 3})); tr != nil || err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewTransport(WithLimit(Burst 3)) = %v, %v; want the refusal", tr, err)
	}
	tr := New(nil, WithLimit(Limit{Name: "api", Rate: 1}))
	if err := tr.AddLimit(Limit{Name: "more", Burst: 3}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("AddLimit(Burst 3) = %v, want the refusal", err)
	}
	if err := tr.SetLimit(Limit{Name: "api", Burst: 3}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("SetLimit(Burst 3) = %v, want the refusal", err)
	}
	if got := tr.Limits()[0]; got.Rate != 1 {
		t.Errorf("a refused SetLimit changed the scope: %+v", got)
	}
	t.Setenv("API_BURST", "3")
	if _, err := LimitFromEnv("API"); err == nil || !strings.Contains(err.Error(), "API_BURST") || !strings.Contains(err.Error(), want) {
		t.Errorf("LimitFromEnv with a burst alone = %v, want API_BURST refused", err)
	}
	t.Setenv("API_MAX_CONCURRENT", "2")
	if l, err := LimitFromEnv("API"); err != nil || l.Burst != 3 || l.MaxConcurrent != 2 {
		t.Errorf("LimitFromEnv with a burst and a cap = %+v, %v; want both taken", l, err)
	}
}

// What Limits reports of a scope is a Limit SetLimit takes back: a scope
// with no Rate reports no Burst, which would have nothing to size.
func TestLimitsOfAScopeWithNoRateValidateAgain(t *testing.T) {
	tr := New(nil, WithLimit(Limit{Name: "placeholder", MaxWait: time.Second}),
		WithLimit(Limit{Name: "spaced", MinSpacing: time.Second}), WithLimit(Limit{Name: "bucket", Rate: 2}))
	for _, l := range tr.Limits() {
		if err := l.Validate(); err != nil {
			t.Errorf("Limits() reports %+v, which does not validate: %v", l, err)
		}
		if err := tr.SetLimit(l); err != nil {
			t.Errorf("SetLimit(%q) of what Limits reports: %v", l.Name, err)
		}
		if want := map[string]int{"bucket": DefaultBurst}[l.Name]; l.Burst != want {
			t.Errorf("scope %q reports Burst %d, want %d", l.Name, l.Burst, want)
		}
	}
}
