package ratewise

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestPolicyFromEnvGoodValues(t *testing.T) {
	t.Setenv("KB_RETRY_MAX_ATTEMPTS", "7")
	t.Setenv("KB_RETRY_INITIAL_DELAY", "250") // whole milliseconds
	t.Setenv("KB_RETRY_MAX_DELAY", "1m30s")
	t.Setenv("KB_RETRY_TOTAL_CAP", "5m")
	t.Setenv("KB_RETRY_MULTIPLIER", "1.5")
	t.Setenv("KB_RETRY_JITTER", "Proportional")
	p, err := PolicyFromEnv("KB")
	if err != nil {
		t.Fatal(err)
	}
	want := RetryPolicy{MaxAttempts: 7, InitialDelay: 250 * time.Millisecond, MaxDelay: 90 * time.Second,
		TotalWaitCap: 5 * time.Minute, Multiplier: 1.5, Jitter: JitterProportional}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("PolicyFromEnv = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("the policy read does not validate: %v", err)
	}
	for _, tt := range []struct{ value string }{{"full"}, {"none"}} {
		t.Setenv("KB_RETRY_JITTER", tt.value)
		if p, err := PolicyFromEnv("KB_"); err != nil || p.Jitter.String() != tt.value {
			t.Errorf("jitter %q: %v, %v", tt.value, p.Jitter, err)
		}
	}
}

func TestPolicyFromEnvUnsetMeansDefaults(t *testing.T) {
	t.Setenv("KB_RETRY_MAX_ATTEMPTS", " ")
	p, err := PolicyFromEnv("KB")
	if err != nil || p.MaxAttempts != 0 || p.InitialDelay != 0 || p.MaxDelay != 0 || p.Multiplier != 0 {
		t.Errorf("nothing set: %+v, %v; want the zero policy", p, err)
	}
}

func TestPolicyFromEnvBadValues(t *testing.T) {
	bad := map[string]string{
		"KB_RETRY_MAX_ATTEMPTS":  "0",
		"KB_RETRY_INITIAL_DELAY": "soon",
		"KB_RETRY_MAX_DELAY":     "-5s",
		"KB_RETRY_TOTAL_CAP":     "-100",
		"KB_RETRY_MULTIPLIER":    "0.5",
		"KB_RETRY_JITTER":        "some",
	}
	for k, v := range bad {
		t.Setenv(k, v)
	}
	_, err := PolicyFromEnv("KB")
	if err == nil {
		t.Fatal("no error")
	}
	for k, v := range bad {
		if !strings.Contains(err.Error(), k+`="`+v+`"`) {
			t.Errorf("error does not name %s=%q:\n%v", k, v, err)
		}
	}
	for _, allowed := range []string{"at least 1", "a duration", "full, proportional or none", "finite number of at least 1"} {
		if !strings.Contains(err.Error(), allowed) {
			t.Errorf("error does not say what is allowed (%q):\n%v", allowed, err)
		}
	}
	for _, tt := range []struct{ name, value string }{
		{"KB_RETRY_MULTIPLIER", "NaN"}, {"KB_RETRY_MULTIPLIER", "+Inf"}, {"KB_RETRY_MAX_ATTEMPTS", "three"},
		{"KB_RETRY_MAX_DELAY", "99999999999999999999"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			if _, err := PolicyFromEnv("KB"); err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Errorf("err = %v, want it to name %s", err, tt.name)
			}
		})
	}
}

func TestPolicyFromEnvDelaysKeepTheirOrder(t *testing.T) {
	t.Setenv("KB_RETRY_INITIAL_DELAY", "10s")
	t.Setenv("KB_RETRY_MAX_DELAY", "2s")
	if _, err := PolicyFromEnv("KB"); err == nil || !strings.Contains(err.Error(), `KB_RETRY_MAX_DELAY="2s": want at least the initial delay (10s)`) {
		t.Errorf("err = %v", err)
	}
	var fallbacks []EnvFallback
	p := PolicyFromEnvLenient("KB", RetryPolicy{}, func(f EnvFallback) { fallbacks = append(fallbacks, f) })
	if p.InitialDelay != 10*time.Second || p.MaxDelay != 0 || len(fallbacks) != 1 || fallbacks[0].Var != "KB_RETRY_MAX_DELAY" {
		t.Errorf("lenient: %+v, fallbacks %+v; want the max delay dropped", p, fallbacks)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("lenient policy does not validate: %v", err)
	}
	// An initial delay above the default max delay cannot stand alone.
	t.Setenv("KB_RETRY_MAX_DELAY", "")
	t.Setenv("KB_RETRY_INITIAL_DELAY", "5m")
	p = PolicyFromEnvLenient("KB", RetryPolicy{}, nil)
	if p.InitialDelay != 0 || p.Validate() != nil {
		t.Errorf("lenient with an initial delay of 5m: %+v, %v", p, p.Validate())
	}
}

func TestPolicyFromEnvLenientFallsBackPerVariable(t *testing.T) {
	t.Setenv("KB_RETRY_MAX_ATTEMPTS", "4")
	t.Setenv("KB_RETRY_MULTIPLIER", "lots")
	t.Setenv("KB_RETRY_JITTER", "none")
	t.Setenv("KB_RETRY_TOTAL_CAP", "forever")
	var fallbacks []string
	p := PolicyFromEnvLenient("KB", RetryPolicy{}, func(f EnvFallback) { fallbacks = append(fallbacks, f.Var+"="+f.Value) })
	if p.MaxAttempts != 4 || p.Jitter != JitterNone || p.Multiplier != 0 || p.TotalWaitCap != 0 {
		t.Errorf("lenient = %+v, want the good variables kept and the bad ones default", p)
	}
	if want := []string{"KB_RETRY_TOTAL_CAP=forever", "KB_RETRY_MULTIPLIER=lots"}; strings.Join(fallbacks, ",") != strings.Join(want, ",") {
		t.Errorf("fallbacks = %q, want %q", fallbacks, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("lenient policy does not validate: %v", err)
	}
}

func TestLimitFromEnv(t *testing.T) {
	for _, tt := range []struct {
		rate string
		want rate.Limit
	}{{"2.5", 2.5}, {"30/m", 0.5}, {"3600/h", 1}, {"10/s", 10}, {"90 / min", 1.5}} {
		t.Setenv("TMDB_RATE", tt.rate)
		l, err := LimitFromEnv("TMDB")
		if err != nil || l.Rate != tt.want {
			t.Errorf("rate %q = %v, %v; want %v", tt.rate, l.Rate, err, tt.want)
		}
	}
	t.Setenv("TMDB_BURST", "40")
	t.Setenv("TMDB_MAX_CONCURRENT", "4")
	l, err := LimitFromEnv("TMDB")
	if err != nil || l.Burst != 40 || l.MaxConcurrent != 4 || l.Name != "tmdb" || l.Validate() != nil {
		t.Errorf("LimitFromEnv = %+v, %v", l, err)
	}
	t.Setenv("TMDB_RATE", "")
	t.Setenv("TMDB_MIN_DELAY", "1100")
	if l, err := LimitFromEnv("TMDB"); err != nil || l.MinSpacing != 1100*time.Millisecond {
		t.Errorf("min delay = %v, %v", l.MinSpacing, err)
	}
}

func TestLimitFromEnvBadValues(t *testing.T) {
	bad := map[string]string{"API_RATE": "fast", "API_BURST": "0", "API_MAX_CONCURRENT": "-1", "API_MIN_DELAY": "1d"}
	for k, v := range bad {
		t.Setenv(k, v)
	}
	_, err := LimitFromEnv("API")
	for k, v := range bad {
		if err == nil || !strings.Contains(err.Error(), k+`="`+v+`"`) {
			t.Errorf("error does not name %s=%q: %v", k, v, err)
		}
	}
	for _, r := range []string{"0", "-3", "5/fortnight", "NaN", "1/"} {
		t.Setenv("API_RATE", r)
		if _, err := LimitFromEnv("API"); err == nil || !strings.Contains(err.Error(), "API_RATE") {
			t.Errorf("rate %q: err = %v", r, err)
		}
	}
	// A rate and a spacing clash: lenient keeps the rate.
	for k := range bad {
		t.Setenv(k, "")
	}
	t.Setenv("API_RATE", "5")
	t.Setenv("API_MIN_DELAY", "1s")
	if _, err := LimitFromEnv("API"); err == nil || !strings.Contains(err.Error(), "API_MIN_DELAY") {
		t.Errorf("rate and spacing: err = %v", err)
	}
	var fallbacks []EnvFallback
	l := LimitFromEnvLenient("API", Limit{}, func(f EnvFallback) { fallbacks = append(fallbacks, f) })
	if l.Rate != 5 || l.MinSpacing != 0 || len(fallbacks) != 1 || l.Validate() != nil {
		t.Errorf("lenient = %+v, fallbacks %+v", l, fallbacks)
	}
}

func TestEnvLenientIsAlwaysValid(t *testing.T) {
	values := []string{"", "0", "1", "1ms", "2s", "45s", "3m", "1h", "-1s", "abc", "9999999999999999"}
	for _, initial := range values {
		for _, maxDelay := range values {
			for _, total := range values {
				t.Setenv("T_RETRY_INITIAL_DELAY", initial)
				t.Setenv("T_RETRY_MAX_DELAY", maxDelay)
				t.Setenv("T_RETRY_TOTAL_CAP", total)
				if err := PolicyFromEnvLenient("T", RetryPolicy{}, nil).Validate(); err != nil {
					t.Fatalf("initial %q, max %q, total %q: %v", initial, maxDelay, total, err)
				}
				if p, err := PolicyFromEnv("T"); err == nil && p.Validate() != nil {
					t.Fatalf("strict: no error, but %v", p.Validate())
				}
			}
		}
	}
	for _, r := range []string{"", "1", "30/m", "1e-320", "0", "x"} {
		for _, spacing := range []string{"", "0", "1s", "-1"} {
			for _, burst := range []string{"", "0", "5", "-1"} {
				t.Setenv("L_RATE", r)
				t.Setenv("L_MIN_DELAY", spacing)
				t.Setenv("L_BURST", burst)
				if err := LimitFromEnvLenient("L", Limit{}, nil).Validate(); err != nil {
					t.Fatalf("rate %q, spacing %q, burst %q: %v", r, spacing, burst, err)
				}
			}
		}
	}
}

// youtube-mcp-throttling-spec.md, EC6 and AC6: invalid configuration
// (YOUTUBE_MIN_DELAY=-500, YOUTUBE_MAX_RETRIES=abc) falls back to the
// defaults, 2000 ms and 3 retries, and a warning says so. The spacing
// stays 2s: a fallback to zero would turn throttling off.
func TestEnvLenientBadValueKeepsTheDefault(t *testing.T) {
	t.Setenv("YOUTUBE_MIN_DELAY", "-500")
	t.Setenv("YOUTUBE_RETRY_MAX_ATTEMPTS", "abc")
	var fallbacks []EnvFallback
	warn := func(f EnvFallback) { fallbacks = append(fallbacks, f) }

	l := LimitFromEnvLenient("YOUTUBE", Limit{MinSpacing: 2 * time.Second}, warn)
	if l.MinSpacing != 2*time.Second || l.Name != "youtube" || l.Validate() != nil {
		t.Errorf("LimitFromEnvLenient = %+v, want MinSpacing 2s, named youtube", l)
	}
	p := PolicyFromEnvLenient("YOUTUBE", RetryPolicy{MaxAttempts: 4}, warn) // 3 retries
	if p.MaxAttempts != 4 || p.Validate() != nil {
		t.Errorf("PolicyFromEnvLenient = %+v, want MaxAttempts 4", p)
	}
	want := []EnvFallback{
		{Var: "YOUTUBE_MIN_DELAY", Value: "-500", Used: "2s"},
		{Var: "YOUTUBE_RETRY_MAX_ATTEMPTS", Value: "abc", Used: "4"},
	}
	if len(fallbacks) != len(want) {
		t.Fatalf("fallbacks = %+v, want %d", fallbacks, len(want))
	}
	for i, fb := range fallbacks {
		if fb.Var != want[i].Var || fb.Value != want[i].Value || fb.Used != want[i].Used || fb.Reason == "" {
			t.Errorf("fallback %d = %+v, want %s=%q reported with %q used and a reason", i, fb, want[i].Var, want[i].Value, want[i].Used)
		}
	}
}

// youtube-mcp-throttling-spec.md, EC6: what stands in for a bad value is
// reported as the variable takes it, and a zero one as what it means.
func TestEnvLenientUsedOfZeroDefaults(t *testing.T) {
	t.Setenv("API_MIN_DELAY", "-500")
	t.Setenv("API_RATE", "lots")
	t.Setenv("API_BURST", "0")
	t.Setenv("API_MAX_CONCURRENT", "-1")
	t.Setenv("API_RETRY_MAX_ATTEMPTS", "abc")
	t.Setenv("API_RETRY_INITIAL_DELAY", "soon")
	t.Setenv("API_RETRY_MULTIPLIER", "0.5")
	t.Setenv("API_RETRY_JITTER", "some")
	used := map[string]string{}
	note := func(f EnvFallback) { used[f.Var] = f.Used }
	LimitFromEnvLenient("API", Limit{}, note)
	PolicyFromEnvLenient("API", RetryPolicy{}, note)
	want := map[string]string{
		"API_MIN_DELAY":           "0s (no spacing)",
		"API_RATE":                "0 (no token bucket)",
		"API_BURST":               "1 (the library default)",
		"API_MAX_CONCURRENT":      "0 (no cap)",
		"API_RETRY_MAX_ATTEMPTS":  "5 (the library default)",
		"API_RETRY_INITIAL_DELAY": "1s (the library default)",
		"API_RETRY_MULTIPLIER":    "2 (the library default)",
		"API_RETRY_JITTER":        "full",
	}
	if !reflect.DeepEqual(used, want) {
		t.Errorf("used = %v, want %v", used, want)
	}
	used = map[string]string{}
	LimitFromEnvLenient("API", Limit{Rate: rate.Every(2 * time.Second), Burst: 30, MaxConcurrent: 4}, note)
	PolicyFromEnvLenient("API", RetryPolicy{MaxAttempts: 3, InitialDelay: 250 * time.Millisecond, Multiplier: 1.5,
		Jitter: JitterProportional}, note)
	want = map[string]string{
		"API_MIN_DELAY": "0s (no spacing)", "API_RATE": "0.5", "API_BURST": "30", "API_MAX_CONCURRENT": "4",
		"API_RETRY_MAX_ATTEMPTS": "3", "API_RETRY_INITIAL_DELAY": "250ms", "API_RETRY_MULTIPLIER": "1.5",
		"API_RETRY_JITTER": "proportional",
	}
	if !reflect.DeepEqual(used, want) {
		t.Errorf("over defaults, used = %v, want %v", used, want)
	}
}

// youtube-mcp-throttling-spec.md, AC6: variables not set keep the
// defaults, whole.
func TestEnvLenientUnsetKeepsTheDefaults(t *testing.T) {
	report := func(f EnvFallback) { t.Errorf("nothing set, yet %+v reported", f) }
	policy := RetryPolicy{MaxAttempts: 3, InitialDelay: 2 * time.Second, MaxDelay: time.Minute, TotalWaitCap: 5 * time.Minute,
		Multiplier: 1.5, Jitter: JitterNone, NetworkRetries: 1, RateLimitPhrases: []string{"slow down"}}
	if p := PolicyFromEnvLenient("UNSET", policy, report); !reflect.DeepEqual(p, policy) {
		t.Errorf("PolicyFromEnvLenient = %+v, want the defaults %+v", p, policy)
	}
	limit := Limit{Name: "youtube transcripts", MinSpacing: 2 * time.Second, SpacingJitter: 0.1, MaxConcurrent: 1, Key: Global}
	l := LimitFromEnvLenient("UNSET", limit, report)
	if l.Name != limit.Name || l.MinSpacing != limit.MinSpacing || l.SpacingJitter != limit.SpacingJitter ||
		l.MaxConcurrent != 1 || !sameKeyFunc(l.Key, Global) {
		t.Errorf("LimitFromEnvLenient = %+v, want the defaults %+v", l, limit)
	}
	if l := LimitFromEnvLenient("UNSET", Limit{Rate: 1, Burst: 3}, report); l.Name != "unset" {
		t.Errorf("defaults with no Name: named %q, want the prefix, unset", l.Name)
	}
}

// youtube-mcp-throttling-spec.md, FR1 and EC6: a valid rate from the
// environment replaces the defaults' spacing (a Limit paces by one or
// the other), and a spacing their rate or window; what the defaults set
// besides stays.
func TestEnvLenientPaceOfTheEnvironmentWins(t *testing.T) {
	report := func(f EnvFallback) { t.Errorf("%+v reported", f) }
	t.Setenv("YT_RATE", "30/m")
	l := LimitFromEnvLenient("YT", Limit{MinSpacing: 2 * time.Second, MaxConcurrent: 2}, report)
	if l.Rate != 0.5 || l.MinSpacing != 0 || l.MaxConcurrent != 2 || l.Validate() != nil {
		t.Errorf("rate over a spacing: %+v, want the rate alone, MaxConcurrent 2 kept", l)
	}
	l = LimitFromEnvLenient("YT", Limit{Burst: 30, Window: time.Minute}, report)
	if l.Rate != 0.5 || l.Window != 0 || l.Burst != 30 || l.Validate() != nil {
		t.Errorf("rate over a window: %+v, want the rate with the defaults' burst", l)
	}
	t.Setenv("YT_RATE", "")
	t.Setenv("YT_MIN_DELAY", "1500")
	l = LimitFromEnvLenient("YT", Limit{Rate: 5, Burst: 10}, report)
	if l.MinSpacing != 1500*time.Millisecond || l.Rate != 0 || l.Validate() != nil {
		t.Errorf("spacing over a rate: %+v, want the spacing alone", l)
	}
	// A spacing of 0 turns the spacing off, and nothing else.
	t.Setenv("YT_MIN_DELAY", "0")
	l = LimitFromEnvLenient("YT", Limit{MinSpacing: 2 * time.Second}, report)
	if l.MinSpacing != 0 || l.Validate() != nil {
		t.Errorf("YT_MIN_DELAY=0 over 2s: %+v, want no spacing", l)
	}
}

// youtube-mcp-throttling-spec.md, EC6: a value that does not fit the
// defaults' other fields falls back too, and the Limit validates.
func TestEnvLenientValueThatDoesNotFitTheDefaults(t *testing.T) {
	var fallbacks []EnvFallback
	report := func(f EnvFallback) { fallbacks = append(fallbacks, f) }
	t.Setenv("API_BURST", "3")
	l := LimitFromEnvLenient("API", Limit{Rate: 5, Burst: 10, Reserve: 4}, report)
	if l.Burst != 10 || l.Validate() != nil || len(fallbacks) != 1 || fallbacks[0].Var != "API_BURST" ||
		fallbacks[0].Used != "10" || !strings.Contains(fallbacks[0].Reason, "Reserve (4) must be below Burst (3)") {
		t.Errorf("a burst below the Reserve: %+v, fallbacks %+v", l, fallbacks)
	}
	fallbacks = nil
	t.Setenv("API_BURST", "")
	t.Setenv("API_MIN_DELAY", "1s")
	mem := NewMemoryStore()
	l = LimitFromEnvLenient("API", Limit{Rate: 5, Burst: 10, Store: mem}, report)
	if l.Rate != 5 || l.MinSpacing != 0 || l.Validate() != nil || len(fallbacks) != 1 || fallbacks[0].Var != "API_MIN_DELAY" ||
		fallbacks[0].Used != "0s (no spacing)" {
		t.Errorf("a spacing over a shared bucket: %+v, fallbacks %+v", l, fallbacks)
	}
}

// youtube-mcp-throttling-spec.md, EC6: defaults that do not validate
// are replaced whole by the library's, and that is reported first; the
// variables still apply.
func TestEnvLenientInvalidDefaults(t *testing.T) {
	var fallbacks []EnvFallback
	report := func(f EnvFallback) { fallbacks = append(fallbacks, f) }
	t.Setenv("API_BURST", "7")
	t.Setenv("API_MAX_CONCURRENT", "2")
	l := LimitFromEnvLenient("API", Limit{Rate: 5, MinSpacing: time.Second}, report)
	if l.Rate != 0 || l.MinSpacing != 0 || l.Burst != 7 || l.MaxConcurrent != 2 || l.Name != "api" || l.Validate() != nil {
		t.Errorf("over a Limit with both a rate and a spacing: %+v, want the zero Limit with BURST 7 and MAX_CONCURRENT 2", l)
	}
	if len(fallbacks) != 1 || fallbacks[0].Var != "" || fallbacks[0].Used != "the library defaults" ||
		!strings.Contains(fallbacks[0].Reason, "has both Rate") {
		t.Errorf("fallbacks = %+v, want the defaults refused", fallbacks)
	}
	fallbacks = nil
	t.Setenv("API_RETRY_MAX_ATTEMPTS", "3")
	p := PolicyFromEnvLenient("API", RetryPolicy{InitialDelay: 10 * time.Second, MaxDelay: 2 * time.Second}, report)
	if !reflect.DeepEqual(p, RetryPolicy{MaxAttempts: 3}) || len(fallbacks) != 1 || fallbacks[0].Var != "" ||
		!strings.Contains(fallbacks[0].Reason, "MaxDelay (2s) is below InitialDelay (10s)") {
		t.Errorf("over a policy out of order: %+v, fallbacks %+v; want the zero policy with 3 attempts", p, fallbacks)
	}
}

// kanbanize-rate-limit-plan.md §9 (configuration validation): the delays
// keep their order with the defaults standing in for what is not set; a
// delay out of order falls back to the defaults' value for its field.
func TestEnvLenientDelaysKeepTheirOrderOverDefaults(t *testing.T) {
	defaults := RetryPolicy{InitialDelay: 2 * time.Second, MaxDelay: 10 * time.Second, TotalWaitCap: time.Minute}
	for _, tt := range []struct {
		name             string
		initial, max     string
		want             RetryPolicy
		fellBack, usedAs string
	}{
		{"initial above the defaults' max", "20s", "",
			defaults, "API_RETRY_INITIAL_DELAY", "2s"},
		{"max below the defaults' initial", "", "1s",
			defaults, "API_RETRY_MAX_DELAY", "10s"},
		{"both set, in order", "500ms", "1s",
			RetryPolicy{InitialDelay: 500 * time.Millisecond, MaxDelay: time.Second, TotalWaitCap: time.Minute}, "", ""},
		{"initial within the set max", "15s", "30s",
			RetryPolicy{InitialDelay: 15 * time.Second, MaxDelay: 30 * time.Second, TotalWaitCap: time.Minute}, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("API_RETRY_INITIAL_DELAY", tt.initial)
			t.Setenv("API_RETRY_MAX_DELAY", tt.max)
			var fallbacks []EnvFallback
			p := PolicyFromEnvLenient("API", defaults, func(f EnvFallback) { fallbacks = append(fallbacks, f) })
			if !reflect.DeepEqual(p, tt.want) || p.Validate() != nil {
				t.Errorf("PolicyFromEnvLenient = %+v, want %+v", p, tt.want)
			}
			switch {
			case tt.fellBack == "" && len(fallbacks) != 0:
				t.Errorf("fallbacks = %+v, want none", fallbacks)
			case tt.fellBack != "" && (len(fallbacks) != 1 || fallbacks[0].Var != tt.fellBack || fallbacks[0].Used != tt.usedAs):
				t.Errorf("fallbacks = %+v, want %s with %s used", fallbacks, tt.fellBack, tt.usedAs)
			}
		})
	}
}
