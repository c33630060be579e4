package bench

import (
	"fmt"
	"math"
	"time"
)

// Kind is the kind of limit a scenario sets and a server keeps: a
// scenario runs against the servers of its kind, configured with its
// limit.
type Kind int

const (
	// Bucket is a rate and a burst: Scenario.Rate and Scenario.Burst.
	Bucket Kind = iota
	// Window is a count per window: Scenario.Limit per Scenario.Window.
	Window
	// Concurrency is a cap on the requests served at once: Scenario.Limit,
	// each served in Scenario.Service.
	Concurrency
	// Shedding is a share of requests refused whatever their rate:
	// Scenario.Shed.
	Shedding
)

// String returns the kind's name, such as "bucket".
func (k Kind) String() string {
	switch k {
	case Bucket:
		return "bucket"
	case Window:
		return "window"
	case Concurrency:
		return "concurrency cap"
	case Shedding:
		return "load shedding"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Model is how a server counts requests, which sets the shortest time a
// batch of calls can take against it.
type Model int

const (
	// TokenBucket is a bucket of Burst tokens refilled at Rate: Burst
	// requests at once, then one every 1/Rate.
	TokenBucket Model = iota
	// GCRA is the generic cell rate algorithm: a token bucket kept as the
	// theoretical arrival time of the next request.
	GCRA
	// NginxNoDelay is nginx's limit_req with burst and nodelay: Burst + 1
	// requests at once, then one every 1/Rate.
	NginxNoDelay
	// NginxQueued is nginx's limit_req with burst and no nodelay: up to
	// Burst excess requests wait in the server to be answered one every
	// 1/Rate; only those beyond are refused.
	NginxQueued
	// FixedWindow admits Limit requests in each window of Window,
	// windows following each other from the first request on.
	FixedWindow
	// FixedWindowFromFirst opens a window of Window at the first request
	// after the previous window closed, and admits Limit in it.
	FixedWindowFromFirst
	// SlidingWindow is a sliding-window counter: the requests of the
	// current fixed window plus those of the previous one, weighted by
	// how much of it still overlaps the last Window, must stay within
	// Limit.
	SlidingWindow
	// ConcurrencyCap serves at most Limit requests at once, each for
	// Service, and refuses at once the requests past them.
	ConcurrencyCap
	// LoadShed refuses a share Shed of the requests whatever their rate.
	LoadShed
)

// String returns the model's name, such as "token bucket".
func (m Model) String() string {
	switch m {
	case TokenBucket:
		return "token bucket"
	case GCRA:
		return "GCRA"
	case NginxNoDelay:
		return "nginx limit_req, nodelay"
	case NginxQueued:
		return "nginx limit_req, queued"
	case FixedWindow:
		return "fixed window"
	case FixedWindowFromFirst:
		return "fixed window from the first request"
	case SlidingWindow:
		return "sliding-window counter"
	case ConcurrencyCap:
		return "concurrency cap"
	case LoadShed:
		return "load shedder"
	}
	return fmt.Sprintf("Model(%d)", int(m))
}

// Kind is the kind of limit the model keeps, which says the scenarios a
// server of the model fits.
func (m Model) Kind() Kind {
	switch m {
	case FixedWindow, FixedWindowFromFirst, SlidingWindow:
		return Window
	case ConcurrencyCap:
		return Concurrency
	case LoadShed:
		return Shedding
	}
	return Bucket
}

// Ideal is the shortest time s.Calls calls can take against a server of
// this model configured with the limit of s, timed from the first request
// to the last answer:
//
//	token bucket, GCRA   (N − B) / R
//	nginx nodelay        (N − B − 1) / R
//	nginx queued         (N − 1) / R
//	fixed windows        (⌈N / L⌉ − 1) · W
//	sliding window       (N − ½) · W / L, about
//	concurrency cap      ⌈N / L⌉ · S
//
// A load shedder sets no pace: its ideal is 0, and its tables measure
// their rows against the wall time of a baseline (see [Baseline]).
func (m Model) Ideal(s Scenario) time.Duration {
	n := float64(s.Calls)
	perRate := func(calls float64) time.Duration {
		return time.Duration(max(calls, 0) / s.Rate * float64(time.Second))
	}
	switch m {
	case TokenBucket, GCRA:
		return perRate(n - float64(s.Burst))
	case NginxNoDelay:
		return perRate(n - float64(s.Burst) - 1)
	case NginxQueued:
		return perRate(n - 1)
	case FixedWindow, FixedWindowFromFirst:
		return time.Duration(math.Ceil(n/float64(s.Limit))-1) * s.Window
	case SlidingWindow:
		return time.Duration((n - 0.5) * float64(s.Window) / float64(s.Limit))
	case ConcurrencyCap:
		return time.Duration(math.Ceil(n/float64(s.Limit))) * s.Service
	}
	return 0
}
