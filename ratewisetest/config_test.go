package ratewisetest

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want []string // each must appear in the error; nil means no error
	}{
		{name: "zero", give: Config{}},
		{name: "full", give: Config{Rate: 5, Burst: 10, FaultRate: 1, Faults: []Fault{FaultReset}, RetryAfter: RetryAfterNone, Latency: time.Millisecond}},
		{name: "negative rate", give: Config{Rate: -1}, want: []string{"Rate is -1"}},
		{name: "NaN rate", give: Config{Rate: math.NaN()}, want: []string{"Rate is NaN"}},
		{name: "infinite rate", give: Config{Rate: math.Inf(1)}, want: []string{"Rate is +Inf"}},
		{name: "negative burst", give: Config{Burst: -3}, want: []string{"Burst is -3"}},
		{name: "fault rate above 1", give: Config{FaultRate: 1.5}, want: []string{"FaultRate is 1.5"}},
		{name: "negative fault rate", give: Config{FaultRate: -0.1}, want: []string{"FaultRate is -0.1"}},
		{name: "NaN fault rate", give: Config{FaultRate: math.NaN()}, want: []string{"FaultRate is NaN"}},
		{name: "unknown mode", give: Config{RetryAfter: 7}, want: []string{"RetryAfter is RetryAfterMode(7)"}},
		{name: "unknown fault", give: Config{Faults: []Fault{Fault503, 9}}, want: []string{"Faults[1] is Fault(9)"}},
		{name: "negative latency", give: Config{Latency: -time.Second}, want: []string{"Latency is -1s"}},
		{name: "negative jitter", give: Config{LatencyJitter: -time.Millisecond}, want: []string{"LatencyJitter is -1ms"}},
		{name: "negative fault hint", give: Config{FaultRetryAfter: -time.Second}, want: []string{"FaultRetryAfter is -1s"}},
		{name: "negative slow body delay", give: Config{SlowBodyDelay: -time.Millisecond}, want: []string{"SlowBodyDelay is -1ms"}},
		{
			name: "every bad field at once",
			give: Config{Rate: -2, Burst: -1, FaultRate: 2, RetryAfter: -1, Faults: []Fault{50}},
			want: []string{"Rate is -2", "Burst is -1", "FaultRate is 2", "RetryAfter is RetryAfterMode(-1)", "Faults[0] is Fault(50)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error naming %q", tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "ratewisetest: invalid Config: ") {
				t.Errorf("Validate() = %q, want the prefix %q", msg, "ratewisetest: invalid Config: ")
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, want it to contain %q", msg, w)
				}
			}
		})
	}
}

func TestNewServerPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok {
			t.Fatalf("NewServer(Burst: -1) panicked with %v, want the Validate error", r)
		}
		if want := "Burst is -1"; !strings.Contains(err.Error(), want) {
			t.Errorf("NewServer(Burst: -1) panic = %q, want it to contain %q", err, want)
		}
	}()
	s := NewServer(Config{Burst: -1})
	s.Close()
}

func TestStrings(t *testing.T) {
	tests := []struct {
		give interface{ String() string }
		want string
	}{
		{give: RetryAfterSeconds, want: "RetryAfterSeconds"},
		{give: RetryAfterHTTPDate, want: "RetryAfterHTTPDate"},
		{give: RetryAfterNone, want: "RetryAfterNone"},
		{give: RetryAfterMode(42), want: "RetryAfterMode(42)"},
		{give: Fault503, want: "Fault503"},
		{give: FaultReset, want: "FaultReset"},
		{give: Fault429, want: "Fault429"},
		{give: Fault429NoHint, want: "Fault429NoHint"},
		{give: FaultResetAfterHeaders, want: "FaultResetAfterHeaders"},
		{give: FaultTruncatedBody, want: "FaultTruncatedBody"},
		{give: FaultSlowBody, want: "FaultSlowBody"},
		{give: Fault(-1), want: "Fault(-1)"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.give, got, tt.want)
		}
	}
}
