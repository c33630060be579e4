package main

import (
	"strings"
	"testing"

	"github.com/ratewise/ratewise/kanbanize"
)

func TestConfigFromEnv(t *testing.T) {
	const key = "env-secret-key-88"
	tests := []struct {
		name    string
		env     map[string]string
		wantErr []string // substrings; none means valid
		check   func(config) bool
	}{
		{name: "subdomain and key", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key},
			check: func(c config) bool {
				return c.account == "acme" && c.apiKey == key && c.plan == kanbanize.PlanAuto && c.defaults.MaxAttempts == 0
			}},
		{name: "base URL, plan and defaults", env: map[string]string{"KANBANIZE_BASE_URL": "https://acme.kanbanize.com", "KANBANIZE_API_KEY": key,
			"KANBANIZE_PLAN": "Large", "KANBANIZE_RETRY_MAX_ATTEMPTS": "4", "KANBANIZE_RETRY_INITIAL_DELAY": "2s",
			"KANBANIZE_RETRY_MAX_DELAY": "90000", "KANBANIZE_RETRY_TOTAL_CAP": "5m"},
			check: func(c config) bool {
				d := c.defaults
				return c.plan == "large" && d.MaxAttempts == 4 && d.InitialDelayMs == 2000 && d.MaxDelayMs == 90000 && d.TotalWaitCapMs == 300000
			}},
		{name: "auto", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_PLAN": "Auto"},
			check: func(c config) bool { return c.plan == kanbanize.PlanAuto }},
		{name: "custom plan", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_PLAN": "45/700"},
			check: func(c config) bool {
				l, ok := c.plan.Limits()
				return ok && l == kanbanize.Limits{PerMinute: 45, PerHour: 700}
			}},
		{name: "bad custom plan", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_PLAN": "45/0"},
			wantErr: []string{`KANBANIZE_PLAN is "45/0"`, "like 45/700"}},
		{name: "no key", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme"}, wantErr: []string{"KANBANIZE_API_KEY is not set"}},
		{name: "no account", env: map[string]string{"KANBANIZE_API_KEY": key}, wantErr: []string{"KANBANIZE_BASE_URL", "KANBANIZE_SUBDOMAIN"}},
		{name: "both accounts", env: map[string]string{"KANBANIZE_BASE_URL": "https://a.kanbanize.com", "KANBANIZE_SUBDOMAIN": "a", "KANBANIZE_API_KEY": key},
			wantErr: []string{"both set"}},
		{name: "bad attempts", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_RETRY_MAX_ATTEMPTS": "ten"},
			wantErr: []string{`KANBANIZE_RETRY_MAX_ATTEMPTS is "ten"`}},
		{name: "bad duration", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_RETRY_INITIAL_DELAY": "5 parsecs"},
			wantErr: []string{`KANBANIZE_RETRY_INITIAL_DELAY is "5 parsecs"`}},
		{name: "negative duration", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_RETRY_TOTAL_CAP": "-5"},
			wantErr: []string{`KANBANIZE_RETRY_TOTAL_CAP is "-5"`}},
		{name: "bad plan", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key, "KANBANIZE_PLAN": "gold"},
			wantErr: []string{`KANBANIZE_PLAN is "gold"`}},
		{name: "defaults that clash", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key,
			"KANBANIZE_RETRY_INITIAL_DELAY": "10s", "KANBANIZE_RETRY_MAX_DELAY": "5s"},
			wantErr: []string{"KANBANIZE_RETRY_MAX_DELAY (5s) is below KANBANIZE_RETRY_INITIAL_DELAY (10s)"}},
		{name: "a cap below the default delay", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key,
			"KANBANIZE_RETRY_TOTAL_CAP": "2s"}, wantErr: []string{"KANBANIZE_RETRY_TOTAL_CAP (2s) is below KANBANIZE_RETRY_INITIAL_DELAY (5s, the default)"}},
		{name: "too many attempts", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key,
			"KANBANIZE_RETRY_MAX_ATTEMPTS": "5000"}, wantErr: []string{`KANBANIZE_RETRY_MAX_ATTEMPTS is "5000"`}},
		{name: "a duration past a week", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key,
			"KANBANIZE_RETRY_TOTAL_CAP": "200h"}, wantErr: []string{`KANBANIZE_RETRY_TOTAL_CAP is "200h"`}},
		{name: "zero duration", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": key,
			"KANBANIZE_RETRY_MAX_DELAY": "0s"}, wantErr: []string{`KANBANIZE_RETRY_MAX_DELAY is "0s"`}},
		{name: "a key with a space", env: map[string]string{"KANBANIZE_SUBDOMAIN": "acme", "KANBANIZE_API_KEY": "ab cd"},
			wantErr: []string{"KANBANIZE_API_KEY holds spaces"}},
	}
	for _, tt := range tests {
		cfg, err := configFromEnv(func(k string) string { return tt.env[k] })
		if len(tt.wantErr) == 0 {
			if err != nil || !tt.check(cfg) {
				t.Errorf("%s: config %+v, %v", tt.name, cfg, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("%s: error shows the key: %v", tt.name, err)
		}
	}
}
