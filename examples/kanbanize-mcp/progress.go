package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
)

// progressBuffer is how many notifications may wait for the sender; more
// are dropped. A notification tells of a wait as it starts, so one that
// cannot go out soon is stale anyway.
const progressBuffer = 8

// notifyFunc sends one progress notification, as
// (*mcp.ServerSession).NotifyProgress does.
type notifyFunc func(context.Context, *mcp.ServerSession, *mcp.ProgressNotificationParams) error

// progress tells a client of a call's waits, without ever holding a wait
// back: Report, called as a wait starts, only queues the notification,
// and a goroutine of its own sends it. When the queue is full the
// notification is dropped and counted. Stop ends the goroutine.
type progress struct {
	queue   chan *mcp.ProgressNotificationParams
	cancel  context.CancelFunc
	done    chan struct{}
	token   any
	max     int // the call's max_attempts, for the messages
	mu      sync.Mutex
	n       int // notifications made, sent or not; guarded by mu
	dropped int // guarded by mu
}

// startProgress starts the sender of the notifications of a call with
// progress token token, through notify on session. It sends until ctx
// ends or Stop is called.
func startProgress(ctx context.Context, session *mcp.ServerSession, notify notifyFunc, token any, maxAttempts int) *progress {
	ctx, cancel := context.WithCancel(ctx)
	p := &progress{queue: make(chan *mcp.ProgressNotificationParams, progressBuffer), cancel: cancel,
		done: make(chan struct{}), token: token, max: maxAttempts}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-ctx.Done():
				return
			case n := <-p.queue:
				if ctx.Err() != nil { // stopped while this one waited: it is stale
					p.mu.Lock()
					p.dropped++
					p.mu.Unlock()
					return
				}
				_ = notify(ctx, session, n) // a client gone is the call's to notice, not progress's
			}
		}
	}()
	return p
}

// Report queues a notification of the wait w, if it has a length to
// tell (a wait for a free slot has none). It never blocks. It is
// kanbanize.RetryOptions.Progress.
func (p *progress) Report(w kanbanize.Progress) {
	if w.Delay <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++ // under mu, so that the queue holds them in order
	msg := fmt.Sprintf("waiting %.1fs for %s (attempt %d/%d)", w.Delay.Seconds(), w.Endpoint, w.Attempt, p.max)
	select {
	case p.queue <- &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: float64(p.n), Message: msg}:
	default:
		p.dropped++
	}
}

// Stop ends the sender, dropping what it has not sent: the call is over,
// and notifications must not follow its result. It waits for a
// notification being sent to return, which the end of its context cuts
// short where the transport allows, and returns how many were dropped,
// queued or not.
func (p *progress) Stop() (dropped int) {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped + len(p.queue)
}
