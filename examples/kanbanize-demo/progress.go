package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// progress shows a run as it goes: cards done, 429s the server answered,
// and the waits under way. On a terminal it redraws one line as a progress
// bar; elsewhere it writes a plain line a second.
type progress struct {
	name  string
	total int
	fake  *kanbanizetest.Server
	out   io.Writer
	tty   bool

	done     atomic.Int64
	mu       sync.Mutex
	waitEnds []time.Time // when the waits reported end; guarded by mu

	quit     chan struct{}
	finished chan struct{}
}

func newProgress(name string, total int, fake *kanbanizetest.Server, out io.Writer) *progress {
	p := &progress{name: name, total: total, fake: fake, out: out, tty: isTerminal(out),
		quit: make(chan struct{}), finished: make(chan struct{})}
	go p.loop()
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// waiting records a wait as it starts; it is the reads' progress callback.
func (p *progress) waiting(w kanbanize.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	kept := p.waitEnds[:0]
	for _, end := range p.waitEnds {
		if end.After(now) {
			kept = append(kept, end)
		}
	}
	p.waitEnds = append(kept, now.Add(w.Delay))
}

func (p *progress) cardDone() { p.done.Add(1) }

// stop ends the display with a last, complete line.
func (p *progress) stop() {
	close(p.quit)
	<-p.finished
}

func (p *progress) loop() {
	defer close(p.finished)
	every := time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			p.draw(false)
		case <-p.quit:
			p.draw(true)
			return
		}
	}
}

// draw writes the current state; last ends the line for good.
func (p *progress) draw(last bool) {
	done := int(p.done.Load())
	waiting, longest := p.waits()
	status := fmt.Sprintf("%3d/%d cards  %3d 429s", done, p.total, p.fake.Stats().Limited)
	if waiting > 0 {
		status += fmt.Sprintf("  %d waiting (longest %.1fs)", waiting, longest.Seconds())
	}
	if !p.tty {
		fmt.Fprintf(p.out, "%s: %s\n", p.name, status)
		return
	}
	const width = 20
	filled := width * done / max(p.total, 1)
	line := fmt.Sprintf("%-9s [%s%s] %s", p.name, strings.Repeat("#", filled), strings.Repeat(".", width-filled), status)
	if len(line) > 79 { // one line of the narrowest usual terminal, so \r can redraw it
		line = line[:79]
	}
	fmt.Fprint(p.out, "\r"+line+"\x1b[K") // and clear what a longer line left
	if last {
		fmt.Fprintln(p.out)
	}
}

// waits returns how many waits are under way and the longest time left.
func (p *progress) waits() (int, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	n, longest := 0, time.Duration(0)
	for _, end := range p.waitEnds {
		if left := end.Sub(now); left > 0 {
			n, longest = n+1, max(longest, left)
		}
	}
	return n, longest
}
