package kanbanizetest

import (
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
		{
			name: "full",
			give: Config{
				APIKey: "k", APIKeys: []string{"k2"}, PerAccount: true, Cards: Fixtures(2), PerMinute: 30, PerHour: 500, RetryAfter: RetryAfterNone, RL02: true,
				Latency: time.Second, Scripts: map[Endpoint][]Fault{EndpointCard: {FaultNone, FaultReset}},
			},
		},
		{name: "negative PerMinute", give: Config{PerMinute: -1}, want: []string{"PerMinute is -1"}},
		{name: "negative PerHour", give: Config{PerHour: -5}, want: []string{"PerHour is -5"}},
		{name: "unknown mode", give: Config{RetryAfter: 3}, want: []string{"RetryAfter is RetryAfterMode(3)"}},
		{name: "negative latency", give: Config{Latency: -time.Millisecond}, want: []string{"Latency is -1ms"}},
		{name: "unknown endpoint", give: Config{Scripts: map[Endpoint][]Fault{"cards": {Fault503}}}, want: []string{`Scripts has the key "cards"`}},
		{name: "unknown fault", give: Config{Scripts: map[Endpoint][]Fault{EndpointComments: {Fault503, 9}}}, want: []string{"Scripts[comments][1] is Fault(9)"}},
		{name: "duplicate card", give: Config{Cards: append(Fixtures(2), Fixtures(1)...)}, want: []string{"Cards[2] has card_id 100, like Cards[0]"}},
		{name: "card without ID", give: Config{Cards: []CardFixture{{}}}, want: []string{"Cards[0] has card_id 0"}},
		{
			name: "card that cannot encode",
			give: Config{Cards: []CardFixture{{Card: Card{CardID: 1, Extra: map[string]any{"card_id": 2}}}}},
			want: []string{"Cards[0].Card cannot be encoded", `Card.Extra["card_id"] repeats a standard card field`},
		},
		{
			name: "every bad field at once",
			give: Config{PerMinute: -1, PerHour: -2, RetryAfter: -1, Latency: -time.Second, Scripts: map[Endpoint][]Fault{"x": nil}},
			want: []string{"PerMinute is -1", "PerHour is -2", "RetryAfter is RetryAfterMode(-1)", "Latency is -1s", `Scripts has the key "x"`},
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
			if prefix := "kanbanizetest: invalid Config: "; !strings.HasPrefix(msg, prefix) {
				t.Errorf("Validate() = %q, want the prefix %q", msg, prefix)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Validate() = %q, want it to contain %q", msg, w)
				}
			}
		})
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		err, ok := recover().(error)
		if !ok || !strings.Contains(err.Error(), "PerHour is -1") {
			t.Errorf("New(PerHour: -1) panicked with %v, want the Validate error naming PerHour", err)
		}
	}()
	New(Config{PerHour: -1})
	t.Errorf("New(PerHour: -1) returned, want a panic")
}

func TestNewCopiesScripts(t *testing.T) {
	script := []Fault{Fault503}
	s := New(Config{Scripts: map[Endpoint][]Fault{EndpointCard: script}})
	script[0] = FaultNone
	if r := get(t, s, "/cards/100"); r.status != 503 {
		t.Errorf("GET after the caller changed its script = %d, want 503 as scripted at New", r.status)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		give interface{ String() string }
		want string
	}{
		{give: RetryAfterSeconds, want: "RetryAfterSeconds"},
		{give: RetryAfterHTTPDate, want: "RetryAfterHTTPDate"},
		{give: RetryAfterNone, want: "RetryAfterNone"},
		{give: RetryAfterMode(9), want: "RetryAfterMode(9)"},
		{give: FaultNone, want: "FaultNone"},
		{give: Fault429, want: "Fault429"},
		{give: FaultRL02, want: "FaultRL02"},
		{give: Fault503, want: "Fault503"},
		{give: FaultMalformedJSON, want: "FaultMalformedJSON"},
		{give: FaultReset, want: "FaultReset"},
		{give: Fault(-1), want: "Fault(-1)"},
		{give: EndpointCard, want: "card"},
		{give: EndpointComments, want: "comments"},
		{give: EndpointSubtasks, want: "subtasks"},
		{give: EndpointAPILimits, want: "api_limits"},
		{give: Endpoint("cards"), want: `Endpoint("cards")`},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.give, got, tt.want)
		}
	}
}
