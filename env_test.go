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
	p := PolicyFromEnvLenient("KB", func(f EnvFallback) { fallbacks = append(fallbacks, f) })
	if p.InitialDelay != 10*time.Second || p.MaxDelay != 0 || len(fallbacks) != 1 || fallbacks[0].Var != "KB_RETRY_MAX_DELAY" {
		t.Errorf("lenient: %+v, fallbacks %+v; want the max delay dropped", p, fallbacks)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("lenient policy does not validate: %v", err)
	}
	// An initial delay above the default max delay cannot stand alone.
	t.Setenv("KB_RETRY_MAX_DELAY", "")
	t.Setenv("KB_RETRY_INITIAL_DELAY", "5m")
	p = PolicyFromEnvLenient("KB", nil)
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
	p := PolicyFromEnvLenient("KB", func(f EnvFallback) { fallbacks = append(fallbacks, f.Var+"="+f.Value) })
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
	l := LimitFromEnvLenient("API", func(f EnvFallback) { fallbacks = append(fallbacks, f) })
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
				if err := PolicyFromEnvLenient("T", nil).Validate(); err != nil {
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
				if err := LimitFromEnvLenient("L", nil).Validate(); err != nil {
					t.Fatalf("rate %q, spacing %q, burst %q: %v", r, spacing, burst, err)
				}
			}
		}
	}
}
