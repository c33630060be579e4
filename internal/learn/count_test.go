package learn

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestReadAnswer(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		want   Answer
	}{
		{"no count", 200, http.Header{}, Answer{OK: true, Remaining: -1}},
		{"X-RateLimit", 200, http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"30"}},
			Answer{OK: true, Remaining: 12, Limit: 60, Reset: 30 * time.Second}},
		{"X-RateLimit reset as a Unix time", 200, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}},
			Answer{OK: true, Remaining: 0, Reset: time.Hour}},
		{"RateLimit-* with a policy in Limit", 200, http.Header{"Ratelimit-Limit": {"100, 100;w=60"}, "Ratelimit-Remaining": {"99"}, "Ratelimit-Reset": {"59"}},
			Answer{OK: true, Remaining: 99, Limit: 100, Reset: 59 * time.Second}},
		{"IETF RateLimit and Policy", 200, http.Header{"Ratelimit": {`"hour";r=500;t=1800, "burst";r=3;t=1`}, "Ratelimit-Policy": {`"hour";q=1000;w=3600, "burst";q=10;w=1`}},
			Answer{OK: true, Remaining: 3, Limit: 10, Reset: time.Second}},
		{"IETF RateLimit, dictionary form", 200, http.Header{"Ratelimit": {"limit=100, remaining=7, reset=30"}},
			Answer{OK: true, Remaining: 7, Reset: 30 * time.Second}},
		{"IETF RateLimit, a policy per line", 200, http.Header{"Ratelimit": {`"burst";r=3;t=5`, `"day";r=0;t=60`}},
			Answer{OK: true, Remaining: 0, Reset: time.Minute}},
		{"refused", 429, http.Header{"X-Ratelimit-Remaining": {"0"}}, Answer{Refused: true, Remaining: 0}},
		{"garbage count", 200, http.Header{"X-Ratelimit-Remaining": {"lots"}}, Answer{OK: true, Remaining: -1}},
	}
	for _, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: tt.header}
		tt.want.Flight = -1 // a response says nothing of it
		if got := ReadAnswer(resp, tt.status == 429, now); got != tt.want {
			t.Errorf("%s: ReadAnswer = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestCountKeepsATokenForRequestsOnTheirWay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), time.Time{})
	// No limit or refill known: only the remaining count allows requests.
	a.Outcome(0, Answer{OK: true, Remaining: 3}, t0)
	var sent int
	for range 5 {
		if _, _, _, ok := a.Take(t0); !ok {
			break
		}
		sent++
	}
	// The first goes on the count of 3; with it on its way, 3 − 1 − 1 for
	// reordering leaves room for one more; with two, none.
	if sent != 2 {
		t.Errorf("sent %d on a count of 3 with nothing known to refill, want 2", sent)
	}
}

func TestCountOutOfDateIsAskedAgain(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), time.Time{})
	// A refusal says none is left until the reset, in a second.
	a.Outcome(0, Answer{Refused: true, Remaining: 0, Reset: time.Second}, t0)
	if _, _, _, sent := a.Take(t0.Add(500 * time.Millisecond)); sent {
		t.Fatal("sent before the reset on a count of 0")
	}
	// After it, with nothing on its way to bring a new count, one request
	// goes to learn it, rather than the key waiting for ever.
	if _, _, _, sent := a.Take(t0.Add(time.Second)); !sent {
		t.Fatal("nothing sent after the reset: the key would stall")
	}
}

func TestCountsTogetherTakeTheLowest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), time.Time{})
	// Answers to requests the server took together come in any order.
	a.Outcome(2, Answer{OK: true, Remaining: 4}, t0)
	a.Outcome(3, Answer{OK: true, Remaining: 6}, t0.Add(time.Millisecond))
	if got := a.count.remaining; got != 4 {
		t.Errorf("count after 4 then 6 a millisecond apart = %d, want the lower, 4", got)
	}
	a.Outcome(4, Answer{OK: true, Remaining: 7}, t0.Add(time.Second))
	if got := a.count.remaining; got != 7 {
		t.Errorf("count a second later = %d, want the new 7", got)
	}
	a.Outcome(1, Answer{OK: true, Remaining: 9}, t0.Add(2*time.Second))
	if got := a.count.remaining; got != 7 {
		t.Errorf("count after a late answer to an older request = %d, want 7 kept", got)
	}
}

func TestCountOfNoneWithoutResetIsAskedAgainSlowly(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), time.Time{})
	// Every answer is a refusal saying none is left, and no reset.
	var sends []time.Time
	for now := t0; now.Before(t0.Add(time.Minute)); {
		seq, delay, _, sent := a.Take(now)
		if !sent {
			now = now.Add(max(delay, time.Millisecond))
			continue
		}
		sends = append(sends, now)
		now = now.Add(time.Millisecond)
		a.Outcome(seq, Answer{Refused: true, Remaining: 0, Limit: 10}, now)
	}
	// Asked again after 1s, 2s, 4s, 8s, 16s, 32s: 7 in the first minute.
	if len(sends) > 7 {
		t.Errorf("%d requests in a minute against a count of none left, want the asks spaced out, at most 7", len(sends))
	}
}

// TestCountLeavesTheSlowStartsShare pins what a count that arms a key
// leaves for its paced requests: what it says is left, less the slow
// start's requests still on their way, and less those of them let
// through since it was taken, whose answers were not read for a count.
// A window of 600 a minute said 4 left while 2 of the slow start were
// out: one request goes (a token kept for the order of arrival). Its
// answer says 3 left, before the slow start's 2 reached the server; let
// through after it, they leave 1, and one request goes, not three.
func TestCountLeavesTheSlowStartsShare(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := New(0, math.Inf(1), t0)
	a.Adopt(slowStart(2, map[int]int{0: 4}))
	a.Untracked(Answer{OK: true, Remaining: 4, Limit: 600, Reset: time.Minute, Flight: -1}, 0, t0)
	sends := func() (n int, last uint64) {
		for ; n < 10; n++ {
			seq, _, _, sent := a.Take(t0)
			if !sent {
				break
			}
			last = seq
		}
		return n, last
	}
	n, seq := sends()
	if n != 1 {
		t.Fatalf("%d requests went on a count of 4 with 2 of the slow start on their way; want 1", n)
	}
	a.Outcome(seq, Answer{OK: true, Remaining: 3, Limit: 600, Reset: time.Minute}, t0)
	a.Unpaced(true, 0)
	a.Unpaced(true, 0)
	if n, _ := sends(); n != 1 {
		t.Errorf("%d requests went on a count of 3 the slow start's 2 took from since; want 1", n)
	}
}
