package ratewisetest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// This file writes what a response says about the limit: the rate-limit
// headers, Retry-After and the refusal itself.

// RetryAfterMode says how a refusal tells the client when to come back.
// The zero value is RetryAfterSeconds.
type RetryAfterMode int

const (
	// RetryAfterSeconds sends Retry-After as whole seconds, rounded up, at
	// least 1, of the time until the model would admit one request: for a
	// fixed window, the window's end.
	RetryAfterSeconds RetryAfterMode = iota
	// RetryAfterHTTPDate sends Retry-After as an IMF-fixdate ([http.TimeFormat])
	// of the time the model would admit one request, rounded up to the next
	// whole second.
	RetryAfterHTTPDate
	// RetryAfterNone sends no Retry-After header.
	RetryAfterNone
	// RetryAfterWindow sends the whole Config.Window as Retry-After, in
	// whole seconds rounded up, at least 1, whatever the count: what many
	// sliding-window limiters send. It is only for the window models.
	RetryAfterWindow
)

// String returns the constant's name, such as "RetryAfterSeconds".
func (m RetryAfterMode) String() string {
	switch m {
	case RetryAfterSeconds:
		return "RetryAfterSeconds"
	case RetryAfterHTTPDate:
		return "RetryAfterHTTPDate"
	case RetryAfterNone:
		return "RetryAfterNone"
	case RetryAfterWindow:
		return "RetryAfterWindow"
	}
	return fmt.Sprintf("RetryAfterMode(%d)", int(m))
}

func (m RetryAfterMode) valid() bool {
	return m >= RetryAfterSeconds && m <= RetryAfterWindow
}

// ResetFormat says how X-RateLimit-Reset is written. The reset is when a
// window ends (for SlidingWindow, the current fixed window, as
// go-chi/httprate says) or, for the bucket models, when the bucket is
// full again. The zero value is ResetSeconds. The IETF RateLimit header
// always says its t in delta seconds, as the draft has it.
type ResetFormat int

const (
	// ResetSeconds writes the seconds until the reset, rounded up.
	ResetSeconds ResetFormat = iota
	// ResetUnix writes the Unix time of the reset in seconds, rounded up,
	// as GitHub does.
	ResetUnix
	// ResetDuration writes the time until the reset as a Go duration
	// string rounded up to the millisecond, such as "6m0s" or "1.5s", as
	// OpenAI does.
	ResetDuration
)

// String returns the constant's name, such as "ResetSeconds".
func (f ResetFormat) String() string {
	switch f {
	case ResetSeconds:
		return "ResetSeconds"
	case ResetUnix:
		return "ResetUnix"
	case ResetDuration:
		return "ResetDuration"
	}
	return fmt.Sprintf("ResetFormat(%d)", int(f))
}

func (f ResetFormat) valid() bool {
	return f >= ResetSeconds && f <= ResetDuration
}

// formatReset writes a reset wait from now as f says.
func formatReset(f ResetFormat, now time.Time, wait time.Duration) string {
	switch f {
	case ResetUnix:
		at := now.Add(max(wait, 0))
		sec := at.Unix()
		if at.Nanosecond() != 0 {
			sec++
		}
		return strconv.FormatInt(sec, 10)
	case ResetDuration:
		wait = max(wait, 0)
		if r := wait % time.Millisecond; r != 0 {
			wait += time.Millisecond - r
		}
		return wait.String()
	}
	return strconv.FormatInt(fakehttp.CeilSeconds(wait), 10)
}

// retryAfter returns the Retry-After value telling a client refused at now
// to come back after wait, or "" for none; window is what RetryAfterWindow
// sends.
func retryAfter(mode RetryAfterMode, now time.Time, wait, window time.Duration) string {
	switch mode {
	case RetryAfterSeconds:
		return fakehttp.RetryAfterSeconds(wait)
	case RetryAfterHTTPDate:
		return fakehttp.RetryAfterDate(now, wait)
	case RetryAfterWindow:
		return fakehttp.RetryAfterSeconds(window)
	}
	return ""
}

// setHeaders adds the configured rate-limit headers for v, made at now,
// to h.
func (a *api) setHeaders(h http.Header, v verdict, now time.Time) {
	if a.cfg.PublishHeaders {
		h.Set("X-RateLimit-Limit", a.quota)
		h.Set("X-RateLimit-Remaining", strconv.Itoa(v.remaining))
		h.Set("X-RateLimit-Reset", formatReset(a.cfg.Reset, now, v.reset))
	}
	if a.cfg.IETFHeaders {
		t := v.reset
		if v.remaining == 0 {
			t = v.untilOne
		}
		h.Set("RateLimit-Policy", a.policy)
		h.Set("RateLimit", `"default";r=`+strconv.Itoa(v.remaining)+";t="+strconv.FormatInt(fakehttp.CeilSeconds(t), 10))
	}
}

// refuse answers a request the limit refused with v at now.
func (a *api) refuse(w http.ResponseWriter, v verdict, now time.Time) {
	h := w.Header()
	if a.cfg.HTMLRefusal {
		h.Set("Content-Type", "text/html")
		w.WriteHeader(a.refusalStatus)
		_, _ = io.WriteString(w, a.refusalPage)
		return
	}
	a.setHeaders(h, v, now)
	if ra := a.refusalRetryAfter(v, now); ra != "" {
		h.Set("Retry-After", ra)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(a.refusalStatus)
	_, _ = io.WriteString(w, limitedBody)
}

// refusalRetryAfter returns the Retry-After of a refusal with v at now, or
// "" for none: when a metered model would admit a request, and for the
// others the wait RefusalRetryAfter names, if any.
func (a *api) refusalRetryAfter(v verdict, now time.Time) string {
	if a.cfg.Model.metered() {
		return retryAfter(a.cfg.RetryAfter, now, v.untilOne, a.cfg.Window)
	}
	if a.cfg.RefusalRetryAfter == 0 {
		return ""
	}
	return retryAfter(a.cfg.RetryAfter, now, a.cfg.RefusalRetryAfter, 0)
}

// refusalPage is the HTML page of a refusal with status, in the manner
// of a proxy's error page.
func refusalPage(status int) string {
	title := strconv.Itoa(status)
	if text := http.StatusText(status); text != "" {
		title += " " + text
	}
	return "<html>\r\n<head><title>" + title + "</title></head>\r\n" +
		"<body>\r\n<center><h1>" + title + "</h1></center>\r\n" +
		"<hr><center>ratewisetest</center>\r\n</body>\r\n</html>\r\n"
}
