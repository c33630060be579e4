package ratewise_test

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ratewise/ratewise"
)

// This file is the soak's observer: the trace that hears every wait,
// pause and breaker change, and what it finds against the rules.

// soakObserver keeps the trace events the rules are checked against:
// attempts sent, pauses asked for, breaker changes, each with its time.
type soakObserver struct {
	mu       sync.Mutex
	sent     []keyedEvent
	pauses   []keyedEvent // at: when the hint was read; d: the hint
	breakers []keyedEvent // to: the new state
	text     []string
}

type keyedEvent struct {
	key string
	at  time.Time
	d   time.Duration
	to  ratewise.BreakerState
}

func (o *soakObserver) trace() *ratewise.Trace {
	add := func(list *[]keyedEvent, e keyedEvent) {
		o.mu.Lock()
		defer o.mu.Unlock()
		*list = append(*list, e)
	}
	return &ratewise.Trace{
		AttemptStarted: func(a ratewise.AttemptInfo) {
			add(&o.sent, keyedEvent{key: a.Key, at: time.Now()})
		},
		ResponseClassified: func(r ratewise.ResponseInfo) {
			// A paced transport pauses its key for hints above a second;
			// its pace answers shorter ones.
			if r.Class != ratewise.Final && r.Hint > time.Second {
				add(&o.pauses, keyedEvent{key: r.Key, at: time.Now(), d: r.Hint})
			}
			if r.Err != nil {
				o.mu.Lock()
				o.text = append(o.text, fmt.Sprintf("%+v", r))
				o.mu.Unlock()
			}
		},
		BreakerStateChanged: func(c ratewise.BreakerChange) {
			add(&o.breakers, keyedEvent{key: c.Key, at: time.Now(), to: c.To})
		},
		CallGaveUp: func(c ratewise.CallEndInfo) {
			o.mu.Lock()
			o.text = append(o.text, fmt.Sprintf("%+v", c))
			o.mu.Unlock()
		},
	}
}

// breaches lists attempts sent while their key was paused or its breaker
// open, soakSlack after the pause or the open began.
func (o *soakObserver) breaches() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	type window struct{ from, to time.Time }
	paused := map[string][]window{}
	for _, p := range o.pauses {
		paused[p.key] = append(paused[p.key], window{p.at.Add(soakSlack), p.at.Add(p.d - 10*time.Millisecond)})
	}
	open := map[string][]window{}
	openedAt := map[string]time.Time{}
	for _, c := range o.breakers {
		if at, ok := openedAt[c.key]; ok {
			open[c.key] = append(open[c.key], window{at.Add(soakSlack), c.at})
			delete(openedAt, c.key)
		}
		if c.to == ratewise.BreakerOpen {
			openedAt[c.key] = c.at
		}
	}
	for key, at := range openedAt {
		open[key] = append(open[key], window{at.Add(soakSlack), time.Now()})
	}
	var out []string
	for _, s := range o.sent {
		for _, w := range paused[s.key] {
			if s.at.After(w.from) && s.at.Before(w.to) {
				out = append(out, fmt.Sprintf("%s: sent %v into a pause", s.key, s.at.Sub(w.from)+soakSlack))
			}
		}
		for _, w := range open[s.key] {
			if s.at.After(w.from) && s.at.Before(w.to) {
				out = append(out, fmt.Sprintf("%s: sent %v into an open breaker", s.key, s.at.Sub(w.from)+soakSlack))
			}
		}
	}
	return out
}

func (o *soakObserver) texts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.text)
}

func (o *soakObserver) pauseCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pauses)
}

func (o *soakObserver) openCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.breakers {
		if c.to == ratewise.BreakerOpen {
			n++
		}
	}
	return n
}

// lockedBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
