package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ratewise/ratewise/kanbanize"
)

// config is the server's configuration, read from the environment.
type config struct {
	account  string                 // KANBANIZE_BASE_URL, or KANBANIZE_SUBDOMAIN
	apiKey   string                 // KANBANIZE_API_KEY; never printed
	plan     kanbanize.Plan         // KANBANIZE_PLAN; auto when unset
	defaults kanbanize.RetryOptions // the read_card_with_retry defaults
}

// configFromEnv reads the configuration through getenv (os.Getenv). Each
// error names the variable and, except for the key, the value it got.
func configFromEnv(getenv func(string) string) (config, error) {
	var cfg config
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	base, sub := strings.TrimSpace(getenv("KANBANIZE_BASE_URL")), strings.TrimSpace(getenv("KANBANIZE_SUBDOMAIN"))
	switch {
	case base != "" && sub != "":
		bad("KANBANIZE_BASE_URL and KANBANIZE_SUBDOMAIN are both set: set one")
	case base != "":
		cfg.account = base
	case sub != "":
		cfg.account = sub
	default:
		bad("neither KANBANIZE_BASE_URL (https://acme.kanbanize.com) nor KANBANIZE_SUBDOMAIN (acme) is set")
	}
	switch cfg.apiKey = strings.TrimSpace(getenv("KANBANIZE_API_KEY")); {
	case cfg.apiKey == "":
		bad("KANBANIZE_API_KEY is not set")
	case strings.ContainsFunc(cfg.apiKey, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		bad("KANBANIZE_API_KEY holds spaces or control characters")
	}
	// Unset, the plan is auto: the client reads the account's limits
	// from the API and, when it cannot, learns them from its refusals.
	cfg.plan = kanbanize.PlanAuto
	if v := strings.TrimSpace(getenv("KANBANIZE_PLAN")); v != "" {
		p, err := kanbanize.ParsePlan(v)
		if err != nil {
			bad("KANBANIZE_PLAN is %q: want standard, large, extra-large, auto, or a custom plan's limits a minute and an hour like 45/700", v)
		}
		cfg.plan = p
	}
	if v := strings.TrimSpace(getenv("KANBANIZE_RETRY_MAX_ATTEMPTS")); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 1000 {
			bad("KANBANIZE_RETRY_MAX_ATTEMPTS is %q: want a whole number from 1 to 1000", v)
		}
		cfg.defaults.MaxAttempts = n
	}
	for _, d := range []struct {
		name string
		into *int
	}{
		{"KANBANIZE_RETRY_INITIAL_DELAY", &cfg.defaults.InitialDelayMs},
		{"KANBANIZE_RETRY_MAX_DELAY", &cfg.defaults.MaxDelayMs},
		{"KANBANIZE_RETRY_TOTAL_CAP", &cfg.defaults.TotalWaitCapMs},
	} {
		v := strings.TrimSpace(getenv(d.name))
		if v == "" {
			continue
		}
		ms, err := parseMillis(v)
		if err != nil {
			bad("%s is %q: %v", d.name, v, err)
		}
		*d.into = ms
	}
	if len(errs) == 0 {
		errs = append(errs, clashes(cfg.defaults, getenv)...)
	}
	return cfg, errors.Join(errs...)
}

// clashes names the delays that do not fit together, by their variables:
// the initial delay above the longest one, or above the total cap.
func clashes(d kanbanize.RetryOptions, getenv func(string) string) []error {
	p := d.RetryPolicy() // with the defaults filled in
	describe := func(name string, v time.Duration) string {
		if getenv(name) == "" {
			return fmt.Sprintf("%s (%v, the default)", name, v)
		}
		return fmt.Sprintf("%s (%v)", name, v)
	}
	initial := describe("KANBANIZE_RETRY_INITIAL_DELAY", p.InitialDelay)
	var errs []error
	if p.MaxDelay < p.InitialDelay {
		errs = append(errs, fmt.Errorf("%s is below %s", describe("KANBANIZE_RETRY_MAX_DELAY", p.MaxDelay), initial))
	}
	if p.TotalWaitCap < p.InitialDelay {
		errs = append(errs, fmt.Errorf("%s is below %s", describe("KANBANIZE_RETRY_TOTAL_CAP", p.TotalWaitCap), initial))
	}
	return errs
}

// parseMillis reads a duration as Go writes it ("5s", "1m30s") or as whole
// milliseconds ("5000").
func parseMillis(v string) (int, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 || n > week {
			return 0, errors.New("want a positive duration of at most a week")
		}
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond {
		return 0, errors.New(`want a duration like 5s or 1m30s, or whole milliseconds like 5000`)
	}
	if d > week*time.Millisecond {
		return 0, errors.New("want at most a week")
	}
	return int(d / time.Millisecond), nil
}

// week is the longest delay the variables accept, in milliseconds.
const week = 7 * 24 * 3600 * 1000
