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
		{name: "leaky bucket", give: Config{Model: LeakyBucket, Rate: 2, Burst: 5, NoDelay: true, RefusalStatus: 503, HTMLRefusal: true}},
		{name: "leaky bucket, nginx's default burst", give: Config{Model: LeakyBucket, Rate: 2}},
		{name: "fixed window", give: Config{Model: FixedWindow, Limit: 100, Window: time.Minute, Reset: ResetUnix}},
		{name: "fixed window from first", give: Config{Model: FixedWindowFromFirst, Limit: 1, Window: time.Hour, Reset: ResetDuration}},
		{name: "sliding window", give: Config{Model: SlidingWindow, Limit: 10, Window: time.Second, RetryAfter: RetryAfterWindow}},
		{name: "unknown model", give: Config{Model: 9}, want: []string{"Model is Model(9)"}},
		{
			name: "window model without Limit or Window",
			give: Config{Model: FixedWindow},
			want: []string{"Limit is 0; FixedWindow needs a positive Limit", "Window is 0s; FixedWindow needs a positive Window"},
		},
		{
			name: "window model with a negative Limit and Window",
			give: Config{Model: SlidingWindow, Limit: -1, Window: -time.Second},
			want: []string{"Limit is -1; SlidingWindow needs", "Window is -1s; SlidingWindow needs"},
		},
		{
			name: "window model with a rate and burst",
			give: Config{Model: FixedWindowFromFirst, Limit: 5, Window: time.Second, Rate: 5, Burst: 5},
			want: []string{"Rate is 5 but FixedWindowFromFirst counts Limit per Window", "Burst is 5 but FixedWindowFromFirst counts Limit per Window"},
		},
		{
			name: "bucket model with a limit and window",
			give: Config{Rate: 5, Limit: 5, Window: time.Second},
			want: []string{"Limit is 5 but TokenBucket keeps a bucket", "Window is 1s but TokenBucket keeps a bucket"},
		},
		{name: "leaky bucket without a rate", give: Config{Model: LeakyBucket, Burst: 3}, want: []string{"Rate is 0 but LeakyBucket needs a positive Rate"}},
		{name: "NoDelay on a token bucket", give: Config{Rate: 1, NoDelay: true}, want: []string{"NoDelay is set but Model is TokenBucket"}},
		{
			name: "NoDelay on a window",
			give: Config{Model: SlidingWindow, Limit: 5, Window: time.Second, NoDelay: true},
			want: []string{"NoDelay is set but Model is SlidingWindow"},
		},
		{
			name: "RetryAfterWindow on a bucket",
			give: Config{Model: LeakyBucket, Rate: 1, RetryAfter: RetryAfterWindow},
			want: []string{"RetryAfter is RetryAfterWindow but LeakyBucket has no Window"},
		},
		{name: "concurrency cap", give: Config{Model: ConcurrencyCap, Limit: 5, ServiceTime: 50 * time.Millisecond, RefusalRetryAfter: time.Second}},
		{name: "concurrency cap without a Limit", give: Config{Model: ConcurrencyCap}, want: []string{"Limit is 0; ConcurrencyCap needs a positive Limit"}},
		{
			name: "concurrency cap with a rate, burst, window and headers",
			give: Config{Model: ConcurrencyCap, Limit: 5, Rate: 2, Burst: 3, Window: time.Second, PublishHeaders: true, IETFHeaders: true, RetryAfter: RetryAfterWindow},
			want: []string{
				"Rate is 2 but ConcurrencyCap keeps no bucket", "Burst is 3 but ConcurrencyCap keeps no bucket",
				"Window is 1s but ConcurrencyCap keeps no window", "PublishHeaders is set but ConcurrencyCap meters no quota",
				"IETFHeaders is set but ConcurrencyCap meters no quota", "RetryAfter is RetryAfterWindow but ConcurrencyCap has no Window",
			},
		},
		{name: "load shedder", give: Config{Model: LoadShed, Shed: 0.5, RefusalStatus: 503, HTMLRefusal: true}},
		{name: "load shedder refusing none", give: Config{Model: LoadShed}},
		{name: "load shedder with a Limit", give: Config{Model: LoadShed, Shed: 0.5, Limit: 3}, want: []string{"Limit is 3 but LoadShed keeps no count"}},
		{name: "shed all", give: Config{Model: LoadShed, Shed: 1}, want: []string{"Shed is 1; use a share in [0, 1)"}},
		{name: "negative shed", give: Config{Model: LoadShed, Shed: -0.5}, want: []string{"Shed is -0.5"}},
		{name: "NaN shed", give: Config{Model: LoadShed, Shed: math.NaN()}, want: []string{"Shed is NaN"}},
		{name: "Shed on a token bucket", give: Config{Rate: 1, Shed: 0.5}, want: []string{"Shed is 0.5 but Model is TokenBucket; Shed is for LoadShed only"}},
		{
			name: "RefusalRetryAfter on a window",
			give: Config{Model: FixedWindow, Limit: 1, Window: time.Second, RefusalRetryAfter: time.Second},
			want: []string{"RefusalRetryAfter is 1s but FixedWindow names the wait its count gives"},
		},
		{name: "negative RefusalRetryAfter", give: Config{Model: LoadShed, RefusalRetryAfter: -time.Second}, want: []string{"RefusalRetryAfter is -1s"}},
		{name: "service time on a bucket", give: Config{Rate: 1, ServiceTime: time.Second}},
		{name: "negative service time", give: Config{ServiceTime: -time.Millisecond}, want: []string{"ServiceTime is -1ms"}},
		{name: "unknown reset format", give: Config{Reset: 5}, want: []string{"Reset is ResetFormat(5)"}},
		{name: "refusal status 200", give: Config{RefusalStatus: 200}, want: []string{"RefusalStatus is 200"}},
		{name: "refusal status 600", give: Config{RefusalStatus: 600}, want: []string{"RefusalStatus is 600"}},
		{
			name: "every bad combination at once",
			give: Config{Model: FixedWindow, Rate: 3, NoDelay: true, Reset: -1, RefusalStatus: 302},
			want: []string{
				"Limit is 0", "Window is 0s", "Rate is 3 but FixedWindow", "NoDelay is set",
				"Reset is ResetFormat(-1)", "RefusalStatus is 302",
			},
		},
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
		{give: RetryAfterWindow, want: "RetryAfterWindow"},
		{give: RetryAfterMode(42), want: "RetryAfterMode(42)"},
		{give: TokenBucket, want: "TokenBucket"},
		{give: LeakyBucket, want: "LeakyBucket"},
		{give: FixedWindow, want: "FixedWindow"},
		{give: FixedWindowFromFirst, want: "FixedWindowFromFirst"},
		{give: SlidingWindow, want: "SlidingWindow"},
		{give: ConcurrencyCap, want: "ConcurrencyCap"},
		{give: LoadShed, want: "LoadShed"},
		{give: Model(-1), want: "Model(-1)"},
		{give: ResetSeconds, want: "ResetSeconds"},
		{give: ResetUnix, want: "ResetUnix"},
		{give: ResetDuration, want: "ResetDuration"},
		{give: ResetFormat(3), want: "ResetFormat(3)"},
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
