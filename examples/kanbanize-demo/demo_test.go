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

func TestDemoRatewiseBeatsPlain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, progress bytes.Buffer
		cfg := config{cards: 15, concurrency: 5, plan: kanbanize.PlanStandard, speed: 20, json: true}
		if _, err := run(context.Background(), cfg, &out, &progress); err != nil {
			t.Fatal(err)
		}
		var rep report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("-json output: %v\n%s", err, out.String())
		}
		for _, r := range []result{rep.Retrying, rep.Paced} {
			if r.Failed != 0 || r.Complete != 15 {
				t.Errorf("%s run = %+v, want every card complete", r.Name, r)
			}
		}
		// Retrying finds the limit through 429s; told the plan, ratewise
		// meets fewer than the plain client.
		if rep.Plain.RateLimited == 0 || rep.Paced.RateLimited >= rep.Plain.RateLimited {
			t.Errorf("429s: plain %d, paced %d; want fewer with ratewise", rep.Plain.RateLimited, rep.Paced.RateLimited)
		}
		if rep.Plain.Failed == 0 {
			t.Errorf("plain run = %+v: 45 requests against 30 a minute should fail cards", rep.Plain)
		}
		if rep.Example == nil || rep.Example.PartialError != nil || rep.Example.RateLimitHits == 0 {
			t.Errorf("example envelope = %+v, want a complete one that met 429s", rep.Example)
		}
		if !strings.Contains(progress.String(), "paced:  15/15 cards") {
			t.Errorf("progress lines lack the final count:\n%s", progress.String())
		}
		if strings.Contains(out.String()+progress.String(), apiKey) {
			t.Error("the API key shows in the output")
		}
	})
}

func TestDemoTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out, progress bytes.Buffer
		cfg := config{cards: 3, concurrency: 2, plan: kanbanize.PlanLarge, speed: 20}
		if _, err := run(context.Background(), cfg, &out, &progress); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"3 cards of the large plan (60 requests a minute", "plain     ratewise     ratewise",
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
