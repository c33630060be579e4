package main

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// slowNotify is a client that takes an hour to accept each notification,
// or until the call that sends it ends. It counts the sends that started
// and those that returned.
type slowNotify struct {
	mu                sync.Mutex
	started, returned int
	sent              []*mcp.ProgressNotificationParams
}

func (s *slowNotify) notify(ctx context.Context, _ *mcp.ServerSession, p *mcp.ProgressNotificationParams) error {
	s.mu.Lock()
	s.started++
	s.sent = append(s.sent, p)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.returned++
		s.mu.Unlock()
	}()
	select {
	case <-time.After(time.Hour):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowNotify) counts() (started, returned int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.returned
}

func TestSlowProgressDoesNotDelayWaits(t *testing.T) {
	// A client slow to take progress notifications does not lengthen the
	// read's waits: the card is refused three times, each refusal asking
	// for a second (Retry-After: 1), and the call takes exactly three
	// seconds although the first notification is still being sent when
	// it ends. Sent from the wait itself, it would take three hours.
	synctest.Test(t, func(t *testing.T) {
		slow := &slowNotify{}
		s := connectWith(t, kanbanizetest.Config{RetryAfter: kanbanizetest.RetryAfterSeconds,
			Scripts: map[kanbanizetest.Endpoint][]kanbanizetest.Fault{kanbanizetest.EndpointCard: repeat(kanbanizetest.Fault429, 3)}},
			func(tl *tools) { tl.notify = slow.notify })
		start := time.Now()
		res := s.call(t, "read_card_with_retry", map[string]any{"card_id": "102", "initial_delay_ms": 1}, "token-slow")
		if elapsed := time.Since(start); elapsed != 3*time.Second {
			t.Errorf("the call took %v, want exactly 3s: the three waits the API asked for", elapsed)
		}
		if res.IsError {
			t.Fatalf("tool error: %s", text(res))
		}
		var env kanbanize.Envelope
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &env); err != nil || env.Attempts["card"] != 4 || env.WaitSeconds != 3 {
			t.Errorf("envelope = %s, %v; want the card on its 4th attempt after 3s of waits", b, err)
		}
		// The first send never finished while the call ran; the other two
		// waits' notifications were queued, then dropped when it ended.
		// The call's end cut the send short, and nothing is sent after it.
		started, returned := slow.counts()
		if started != 1 || returned != 1 {
			t.Errorf("sends started %d, returned %d; want 1 and 1: one in flight, ended with the call", started, returned)
		}
		synctest.Wait()
		if again, _ := slow.counts(); again != started {
			t.Errorf("%d notifications sent after the call ended, want none", again-started)
		}
		if slow.sent[0].ProgressToken != "token-slow" || slow.sent[0].Message != "waiting 1.0s for card (attempt 2/10)" {
			t.Errorf("first notification = %+v", slow.sent[0])
		}
	})
}

func TestProgressDropsWhatItCannotSend(t *testing.T) {
	// The queue is bounded: with the client taking nothing, one
	// notification is in flight, progressBuffer wait, and the rest are
	// dropped at once; Report never blocks. Stop drops the queue, ends
	// the send in flight and the goroutine.
	synctest.Test(t, func(t *testing.T) {
		slow := &slowNotify{}
		p := startProgress(context.Background(), nil, slow.notify, "tok", 10)
		wait := kanbanize.Progress{Endpoint: "comments", Attempt: 2, Delay: 1500 * time.Millisecond, Kind: "backoff"}
		p.Report(wait)
		synctest.Wait() // the sender has taken it and is sending
		start := time.Now()
		for range progressBuffer + 5 {
			p.Report(wait)
		}
		p.Report(kanbanize.Progress{Endpoint: "comments", Attempt: 3, Kind: "concurrency"}) // no length: not told
		if d := time.Since(start); d != 0 {
			t.Errorf("Report took %v with the client stuck, want no time", d)
		}
		if dropped := p.Stop(); dropped != progressBuffer+5 {
			t.Errorf("Stop() = %d dropped, want %d: the %d queued and the 5 that did not fit", dropped, progressBuffer+5, progressBuffer)
		}
		select {
		case <-p.done:
		default:
			t.Error("the sender goroutine is still running after Stop")
		}
		started, returned := slow.counts()
		if started != 1 || returned != 1 {
			t.Errorf("sends started %d, returned %d; want 1 and 1", started, returned)
		}
		if got := slow.sent[0]; got.Progress != 1 || got.Message != "waiting 1.5s for comments (attempt 2/10)" || got.ProgressToken != "tok" {
			t.Errorf("notification = %+v", got)
		}
	})
}

func TestProgressSendsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []*mcp.ProgressNotificationParams
		notify := func(_ context.Context, _ *mcp.ServerSession, p *mcp.ProgressNotificationParams) error {
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, p)
			return nil
		}
		p := startProgress(context.Background(), nil, notify, 7, 4)
		for i := 1; i <= 3; i++ {
			p.Report(kanbanize.Progress{Endpoint: "subtasks", Attempt: i + 1, Delay: time.Duration(i) * time.Second})
		}
		synctest.Wait()
		if n := p.Stop(); n != 0 {
			t.Errorf("Stop() = %d dropped, want 0", n)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"waiting 1.0s for subtasks (attempt 2/4)", "waiting 2.0s for subtasks (attempt 3/4)", "waiting 3.0s for subtasks (attempt 4/4)"}
		if len(sent) != len(want) {
			t.Fatalf("%d notifications sent, want %d", len(sent), len(want))
		}
		for i, p := range sent {
			if p.Message != want[i] || p.Progress != float64(i+1) || p.ProgressToken != 7 {
				t.Errorf("notification %d = %+v, want %q, progress %d", i, p, want[i], i+1)
			}
		}
	})
}
