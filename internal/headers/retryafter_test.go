package headers

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

var refNow = time.Date(2026, time.March, 10, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		give   string
		want   time.Duration
		wantOK bool
	}{
		// delta-seconds
		{give: "0", want: 0, wantOK: true},
		{give: "30", want: 30 * time.Second, wantOK: true},
		{give: "  120 ", want: 2 * time.Minute, wantOK: true},
		{give: "007", want: 7 * time.Second, wantOK: true},
		{give: "9223372036", want: 9223372036 * time.Second, wantOK: true}, // largest that fits
		// lenient decimals
		{give: "1.5", want: 1500 * time.Millisecond, wantOK: true},
		{give: "0.25", want: 250 * time.Millisecond, wantOK: true},
		{give: ".5", want: 500 * time.Millisecond, wantOK: true},
		{give: "2.", want: 2 * time.Second, wantOK: true},
		{give: "1.0000000019", want: time.Second + 1, wantOK: true}, // past nanoseconds dropped
		// HTTP-date, all three forms
		{give: "Tue, 10 Mar 2026 12:00:30 GMT", want: 30 * time.Second, wantOK: true},                                           // IMF-fixdate
		{give: "Tuesday, 10-Mar-26 12:01:00 GMT", want: time.Minute, wantOK: true},                                              // RFC 850
		{give: "Tue Mar 10 12:00:05 2026", want: 5 * time.Second, wantOK: true},                                                 // asctime
		{give: "Sunday, 10-Mar-75 12:00:00 GMT", want: time.Date(2075, 3, 10, 12, 0, 0, 0, time.UTC).Sub(refNow), wantOK: true}, // RFC 850, 49 years ahead
		{give: "Wednesday, 10-Mar-77 12:00:00 GMT", want: 0, wantOK: true},                                                      // RFC 850, 51 years ahead: 1977
		{give: "Tue Mar  3 12:00:00 2026", want: 0, wantOK: true},                                                               // asctime, past
		{give: "Mon, 09 Mar 2026 12:00:00 GMT", want: 0, wantOK: true},                                                          // past date
		{give: "Thu, 01 Jan 1970 00:00:00 GMT", want: 0, wantOK: true},                                                          // long past
		{give: "Fri, 10 Mar 2028 12:00:00 GMT", want: 731 * 24 * time.Hour, wantOK: true},                                       // far, but fits
		{give: "Fri, 31 Dec 9999 23:59:59 GMT", want: 0, wantOK: false},                                                         // past what a Duration holds
		{give: "Tue, 10 Mar 2026 12:00:30 UTC", want: 30 * time.Second, wantOK: true},                                           // time.RFC1123 of a UTC time (sethvargo/go-limiter)
		{give: "Tue, 10 Mar 2026 12:00:30 PST", want: 0, wantOK: false},                                                         // a zone name Go would read as UTC
		{give: "Tue, 10 Mar 2026 12:00:30 +0000", want: 0, wantOK: false},                                                       // not an HTTP-date
		{give: "2026-03-10T12:00:30Z", want: 0, wantOK: false},                                                                  // RFC 3339 is not allowed
		// hostile values
		{give: "", wantOK: false},
		{give: "   ", wantOK: false},
		{give: "-1", wantOK: false},
		{give: "+5", wantOK: false},
		{give: "1e3", wantOK: false},
		{give: "NaN", wantOK: false},
		{give: "Inf", wantOK: false},
		{give: "0x10", wantOK: false},
		{give: "1.2.3", wantOK: false},
		{give: ".", wantOK: false},
		{give: "5 s", wantOK: false},
		{give: "30, 60", wantOK: false},
		{give: "9223372037", wantOK: false}, // one past what a Duration holds
		{give: "99999999999", wantOK: false},
		{give: "99999999999999999999999999999", wantOK: false},
		{give: "1\x00", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.give, refNow)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestWaitHint(t *testing.T) {
	unix := func(d time.Duration) string { return strconv.FormatInt(refNow.Add(d).Unix(), 10) }
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		wantOK bool
	}{
		{name: "none", header: http.Header{}, wantOK: false},
		{name: "Retry-After seconds", header: http.Header{"Retry-After": {"7"}}, want: 7 * time.Second, wantOK: true},
		{name: "Retry-After wins over reset", header: http.Header{"Retry-After": {"7"}, "X-Ratelimit-Reset": {"60"}},
			want: 7 * time.Second, wantOK: true},
		{name: "first Retry-After of duplicates", header: http.Header{"Retry-After": {"7", "70"}}, want: 7 * time.Second, wantOK: true},
		{name: "bad Retry-After falls through", header: http.Header{"Retry-After": {"soon"}, "Ratelimit-Reset": {"12"}},
			want: 12 * time.Second, wantOK: true},
		{name: "first valid Retry-After", header: http.Header{"Retry-After": {"soon", "8"}}, want: 8 * time.Second, wantOK: true},
		{name: "RateLimit-Reset", header: http.Header{"Ratelimit-Reset": {"12"}}, want: 12 * time.Second, wantOK: true},
		{name: "RateLimit-Reset, quota spent", header: http.Header{"Ratelimit-Reset": {"12"}, "Ratelimit-Remaining": {"0"}},
			want: 12 * time.Second, wantOK: true},
		{name: "RateLimit-Reset, quota left", header: http.Header{"Ratelimit-Reset": {"12"}, "Ratelimit-Remaining": {"5"}}, wantOK: false},
		{name: "RateLimit-Reset unix time", header: http.Header{"Ratelimit-Reset": {unix(time.Minute)}}, want: time.Minute, wantOK: true},
		{name: "X-RateLimit-Reset, quota left", header: http.Header{"X-Ratelimit-Reset": {unix(50 * time.Minute)}, "X-Ratelimit-Remaining": {"4000"}},
			wantOK: false},
		{name: "X-RateLimit-Reset, quota spent", header: http.Header{"X-Ratelimit-Reset": {unix(50 * time.Minute)}, "X-Ratelimit-Remaining": {"0"}},
			want: 50 * time.Minute, wantOK: true},
		{name: "RateLimit list form", header: http.Header{"Ratelimit": {`"default";r=0;t=30`}}, want: 30 * time.Second, wantOK: true},
		{name: "RateLimit list, longest exhausted", header: http.Header{"Ratelimit": {`"burst";r=0;t=5, "day";r=0;t=3600, "hour";r=40;t=9000`}},
			want: time.Hour, wantOK: true},
		{name: "RateLimit list, over two lines", header: http.Header{"Ratelimit": {`"burst";r=0;t=5`, `"day";r=0;t=60`}},
			want: time.Minute, wantOK: true},
		{name: "RateLimit all with quota left", header: http.Header{"Ratelimit": {`"a";r=3;t=30`}}, wantOK: false},
		{name: "RateLimit dictionary form", header: http.Header{"Ratelimit": {"limit=100, remaining=0, reset=50"}},
			want: 50 * time.Second, wantOK: true},
		{name: "RateLimit dictionary form, quota left", header: http.Header{"Ratelimit": {"limit=100, remaining=50, reset=50"}},
			wantOK: false},
		{name: "RateLimit garbage", header: http.Header{"Ratelimit": {";;==,,"}}, wantOK: false},
		{name: "X-RateLimit-Reset delta", header: http.Header{"X-Ratelimit-Reset": {"45"}}, want: 45 * time.Second, wantOK: true},
		{name: "X-RateLimit-Reset unix time", header: http.Header{"X-Ratelimit-Reset": {unix(90 * time.Second)}},
			want: 90 * time.Second, wantOK: true},
		{name: "X-RateLimit-Reset unix time past", header: http.Header{"X-Ratelimit-Reset": {unix(-time.Hour)}}, want: 0, wantOK: true},
		{name: "X-RateLimit-Reset decimal unix time", header: http.Header{"X-Ratelimit-Reset": {unix(2*time.Second) + ".5"}},
			want: 2500 * time.Millisecond, wantOK: true},
		{name: "X-RateLimit-Reset huge", header: http.Header{"X-Ratelimit-Reset": {"99999999999999999999"}}, wantOK: false},
		{name: "X-RateLimit-Reset negative", header: http.Header{"X-Ratelimit-Reset": {"-5"}}, wantOK: false},
	}
	for _, tt := range tests {
		got, ok := WaitHint(&http.Response{Header: tt.header}, refNow)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: WaitHint = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
	if _, ok := WaitHint(nil, refNow); ok {
		t.Error("WaitHint(nil) reported a hint")
	}
}

// RetryAfterHint reads the hints of the answer itself and none of a
// quota's resets, however spent the quota.
func TestRetryAfterHint(t *testing.T) {
	spent := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"},
		"Ratelimit": {`"default";r=0;t=30`}, "Ratelimit-Reset": {"30"}}
	with := func(k, v string) http.Header {
		h := spent.Clone()
		h.Set(k, v)
		return h
	}
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		wantOK bool
	}{
		{name: "a spent quota alone", header: spent, wantOK: false},
		{name: "Retry-After", header: with("Retry-After", "7"), want: 7 * time.Second, wantOK: true},
		{name: "Retry-After-Ms", header: with("Retry-After-Ms", "250"), want: 250 * time.Millisecond, wantOK: true},
		{name: "garbage Retry-After", header: with("Retry-After", "soon"), wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: tt.header}
			got, ok := RetryAfterHint(resp, refNow)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfterHint = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
			if full, _ := WaitHint(resp, refNow); !tt.wantOK && full != 30*time.Second {
				t.Errorf("WaitHint = %v, want the reset's 30s that RetryAfterHint leaves out", full)
			}
		})
	}
	if _, ok := RetryAfterHint(nil, refNow); ok {
		t.Error("RetryAfterHint(nil) gave a hint")
	}
}
