package kanbanize_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

func TestPlanLimits(t *testing.T) {
	tests := []struct {
		plan               kanbanize.Plan
		perMinute, perHour int
	}{
		{kanbanize.PlanStandard, 30, 600},
		{kanbanize.PlanLarge, 60, 900},
		{kanbanize.PlanExtraLarge, 100, 1200},
	}
	for _, tt := range tests {
		limits, err := kanbanize.PlanLimits(tt.plan)
		if err != nil || len(limits) != 2 {
			t.Fatalf("PlanLimits(%s) = %v, %v", tt.plan, limits, err)
		}
		minute, hour := limits[0], limits[1]
		if minute.Burst != tt.perMinute || float64(minute.Rate)*60 != float64(tt.perMinute) ||
			hour.Burst != tt.perHour || float64(hour.Rate)*3600 < float64(tt.perHour)-1e-9 || float64(hour.Rate)*3600 > float64(tt.perHour)+1e-9 {
			t.Errorf("PlanLimits(%s) = %v/s burst %d and %v/s burst %d", tt.plan, minute.Rate, minute.Burst, hour.Rate, hour.Burst)
		}
		for _, l := range limits {
			if err := l.Validate(); err != nil {
				t.Errorf("PlanLimits(%s): %v", tt.plan, err)
			}
		}
	}
	if _, err := kanbanize.PlanLimits("gold"); err == nil {
		t.Error(`PlanLimits("gold") gave no error`)
	}
	custom, err := kanbanize.PlanLimits(kanbanize.CustomPlan(45, 700))
	if err != nil || len(custom) != 2 || custom[0].Name != "kanbanize 45/700 per minute" || custom[0].Burst != 45 ||
		custom[0].Rate != rate.Every(time.Minute/45) || custom[1].Burst != 700 || custom[1].Rate != rate.Every(time.Hour/700) {
		t.Errorf("PlanLimits(45/700) = %+v, %v; want 45 a minute and 700 an hour", custom, err)
	}
	if _, err := kanbanize.PlanLimits(kanbanize.PlanAuto); err == nil || !strings.Contains(err.Error(), "WithPlan") {
		t.Errorf("PlanLimits(auto) = %v, want an error pointing to WithPlan", err)
	}
	if _, err := kanbanize.PlanLimits(kanbanize.CustomPlan(0, 700)); err == nil || !strings.Contains(err.Error(), "within 1 to") {
		t.Errorf("PlanLimits(0/700) = %v, want an error saying the bounds", err)
	}
}

func TestPlanLimitsOfAPlan(t *testing.T) {
	tests := []struct {
		give   kanbanize.Plan
		want   kanbanize.Limits
		wantOK bool
	}{
		{give: kanbanize.PlanStandard, want: kanbanize.Limits{PerMinute: 30, PerHour: 600}, wantOK: true},
		{give: kanbanize.PlanExtraLarge, want: kanbanize.Limits{PerMinute: 100, PerHour: 1200}, wantOK: true},
		{give: kanbanize.CustomPlan(45, 700), want: kanbanize.Limits{PerMinute: 45, PerHour: 700}, wantOK: true},
		{give: kanbanize.PlanAuto},
		{give: ""},
		{give: "45/0"},
	}
	for _, tt := range tests {
		if got, ok := tt.give.Limits(); got != tt.want || ok != tt.wantOK {
			t.Errorf("Plan(%q).Limits() = %+v, %v; want %+v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParsePlan(t *testing.T) {
	for give, want := range map[string]kanbanize.Plan{"standard": kanbanize.PlanStandard, " Large ": kanbanize.PlanLarge,
		"extra-large": kanbanize.PlanExtraLarge, "EXTRA_LARGE": kanbanize.PlanExtraLarge, "xl": kanbanize.PlanExtraLarge,
		"auto": kanbanize.PlanAuto, " AUTO": kanbanize.PlanAuto,
		"45/700": kanbanize.CustomPlan(45, 700), " 45 / 700 ": "45/700", "45m/700h": "45/700"} {
		if got, err := kanbanize.ParsePlan(give); err != nil || got != want {
			t.Errorf("ParsePlan(%q) = %q, %v; want %q", give, got, err, want)
		}
	}
	for give, want := range map[string]string{
		"enterprise": `unknown plan "enterprise"`,
		"45/":        `the custom plan "45/": its numbers are not whole numbers`,
		"0/700":      "within 1 to 1000000",
		"45/-1":      "within 1 to 1000000",
		"45/7000000": "within 1 to 1000000",
		"1.5/700":    "not whole numbers",
	} {
		if _, err := kanbanize.ParsePlan(give); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePlan(%q) = %v, want an error saying %q", give, err, want)
		}
	}
}

func TestWithPlanPacesUnderTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fake := newClient(t, kanbanizetest.Config{PerMinute: 30, PerHour: 600}, kanbanize.WithPlan(kanbanize.PlanStandard))
		start := time.Now()
		for id := 100; id < 115; id++ { // 45 requests
			if _, err := c.ReadCard(context.Background(), kanbanize.ID(id).String()); err != nil {
				t.Fatalf("card %d: %v", id, err)
			}
		}
		if st := fake.Stats(); st.Limited != 0 || st.Requests != 45 {
			t.Errorf("server stats = %+v, want 45 requests and no refusal", st)
		}
		// 30 at once, then one every 2s.
		if got := time.Since(start); got != 30*time.Second {
			t.Errorf("took %v, want 30s", got)
		}
	})
}

func TestNewClientErrors(t *testing.T) {
	if _, err := kanbanize.NewClient("acme", " "); err == nil {
		t.Error("an empty API key gave no error")
	}
	if _, err := kanbanize.NewClient("not a subdomain", "k"); err == nil {
		t.Error("a bad account gave no error")
	}
	if _, err := kanbanize.NewClient("acme", "k", kanbanize.WithPlan("gold")); err == nil {
		t.Error("an unknown plan gave no error")
	}
	if _, err := kanbanize.NewClient("acme", "k", kanbanize.WithPlan(kanbanize.CustomPlan(45, 0))); err == nil {
		t.Error("a custom plan of no requests an hour gave no error")
	}
	rw := &http.Client{Transport: ratewise.New(nil)}
	if _, err := kanbanize.NewClient("acme", "k", kanbanize.WithHTTPClient(rw), kanbanize.WithPlan(kanbanize.PlanLarge)); err != nil {
		t.Errorf("WithPlan over a ratewise transport of the caller's: %v", err)
	}
	if c, err := kanbanize.NewClient("acme", "k", kanbanize.WithHTTPClient(rw)); err != nil || c.Transport() != rw.Transport {
		t.Errorf("a ratewise transport of the caller's: %v, Transport() %v", err, c.Transport())
	}
	if c, err := kanbanize.NewClient("acme", "k"); err != nil || c.Transport() == nil {
		t.Errorf("the client's own transport: %v, %v", c.Transport(), err)
	}
}
