package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/ratewise/ratewise/kanbanize"
)

// The demo's runs, in fake time: every kanbanize run reads every card
// whole where the plain client fails cards; told the plan, or reading it
// from /apiLimits, the client meets fewer refusals than the plain one;
// with or without Retry-After from the fake.
func TestDemoKanbanizeBeatsPlain(t *testing.T) {
	for _, retryAfter := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var out, progress bytes.Buffer
			cfg := config{cards: 15, concurrency: 5, plan: kanbanize.PlanStandard, speed: 20, retryAfter: retryAfter, json: true}
			if _, err := run(context.Background(), cfg, &out, &progress); err != nil {
				t.Fatal(err)
			}
			var rep report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatalf("-json output: %v\n%s", err, out.String())
			}
			for _, r := range []result{rep.Learning, rep.Told, rep.Auto} {
				if r.Failed != 0 || r.Complete != 15 {
					t.Errorf("retry-after %v: %s run = %+v, want every card complete", retryAfter, r.Name, r)
				}
			}
			for _, r := range []result{rep.Told, rep.Auto} {
				if rep.Plain.RateLimited == 0 || r.RateLimited >= rep.Plain.RateLimited {
					t.Errorf("retry-after %v: 429s: plain %d, %s %d; want fewer with the plan", retryAfter, rep.Plain.RateLimited, r.Name, r.RateLimited)
				}
			}
			// Three requests a card, one more for each refusal, and for the
			// auto run its one read of /apiLimits.
			for _, c := range []struct {
				r     result
				extra int
			}{{rep.Learning, 0}, {rep.Told, 0}, {rep.Auto, 1}} {
				if want := 3*15 + c.r.RateLimited + c.extra; c.r.Requests != want {
					t.Errorf("retry-after %v: %s sent %d requests, want %d", retryAfter, c.r.Name, c.r.Requests, want)
				}
			}
			// Put on the fake's clock once read, the limits the auto run
			// reads pace it as the told plan's do.
			if rep.Auto.WallSeconds > 1.1*rep.Told.WallSeconds {
				t.Errorf("retry-after %v: wall time: told %.2fs, auto %.2fs; want auto within 10%%", retryAfter, rep.Told.WallSeconds, rep.Auto.WallSeconds)
			}
			if rep.Plain.Failed == 0 {
				t.Errorf("plain run = %+v: 45 requests against 30 a minute should fail cards", rep.Plain)
			}
			if rep.Example == nil || rep.Example.PartialError != nil || rep.Example.RateLimitHits == 0 {
				t.Errorf("retry-after %v: example envelope = %+v, want a complete one that met 429s", retryAfter, rep.Example)
			}
			if !strings.Contains(progress.String(), "plan auto:  15/15 cards") {
				t.Errorf("progress lines lack the final count:\n%s", progress.String())
			}
			if strings.Contains(out.String()+progress.String(), apiKey) {
				t.Error("the API key shows in the output")
			}
		})
	}
}

func TestDemoTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, progress bytes.Buffer
		cfg := config{cards: 3, concurrency: 2, plan: kanbanize.PlanLarge, speed: 20}
		if _, err := run(context.Background(), cfg, &out, &progress); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"3 cards of the large plan (60 requests a minute", "plain    kanbanize    kanbanize    kanbanize", "not told    plan told    plan auto",
			"requests the server received", "cards failed", "try more -cards"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q:\n%s", want, out.String())
			}
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []config{{cards: 0, concurrency: 1, speed: 1}, {cards: 1, concurrency: 0, speed: 1}, {cards: 1, concurrency: 1, speed: 0},
		{cards: 1, concurrency: 1, speed: 1, plan: kanbanize.PlanAuto}} {
		if err := c.validate(); err == nil {
			t.Errorf("validate(%+v) = nil", c)
		}
	}
}
