package ratewise

import (
	"context"
	"time"

	"github.com/ratewise/ratewise/internal/learn"
	"github.com/ratewise/ratewise/store"
)

// This file is the MemoryStore's store.Learned: the reference of what a
// fleet's shared learned pace does, which ratewise/redis does in a script.

var _ store.Learned = (*MemoryStore)(nil)

// memLearned is a key's learned state, and when it was last asked: a key
// idle for DefaultIdleTimeout is forgotten, as a transport forgets it.
type memLearned struct {
	learn.Shared
	used time.Time
}

// Learn implements store.Learned. A key that has learned nothing keeps
// no state: asking for its turn writes nothing.
func (m *MemoryStore) Learn(_ context.Context, key string, ask *store.LearnAsk) (store.LearnAnswer, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.learned[key]
	if l == nil {
		if !teaches(ask) {
			return store.LearnAnswer{}, nil
		}
		l = &memLearned{}
		m.learned[key] = l
		m.prune(now)
	}
	l.used = now
	return l.Learn(now, ask), nil
}

// teaches reports whether ask's outcomes may teach a key that learned
// nothing: a refusal may, and a count of the server's quota.
func teaches(ask *store.LearnAsk) bool {
	for _, o := range ask.Outcomes {
		if o.Kind == store.Refused || o.Counted {
			return true
		}
	}
	return false
}
