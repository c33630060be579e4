package redis

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/redis/redistest"
	"github.com/ratewise/ratewise/store"
)

// A Redis that answers garbage for a learned key gets a clear error, which
// the store logs, and the transport goes on with its own state; nothing
// panics: its scripts flushed (SCRIPT FLUSH: they are loaded again), the
// key of another type written by someone else, a field that is no
// number. Once the key is fixed, the fleet learns there again.
func TestLearnedGarbageIsAnErrorNotAPanic(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client()
	defer client.Close()
	var log syncBuffer
	rs := New(client, Options{Prefix: "garbage:", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	ctx := context.Background()
	key := store.ScopeKey(ratewise.LearnedScope, "api.test")
	refused := &store.LearnAsk{Outcomes: []store.Outcome{{Kind: store.Refused}}}

	if _, err := rs.Learn(ctx, key, refused); err != nil {
		t.Fatal(err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if a, err := rs.Learn(ctx, key, &store.LearnAsk{Take: true}); err != nil || !a.Paced {
		t.Errorf("after SCRIPT FLUSH: %+v, %v; want the script loaded again and the key paced", a, err)
	}

	if err := client.HSet(ctx, rs.learnedKey(key), "mode", "lots").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := rs.Learn(ctx, key, &store.LearnAsk{Take: true})
	if err == nil || !strings.Contains(err.Error(), "mode") || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("a field that is no number: %v, want an error naming it", err)
	}

	rs = New(client, Options{Prefix: "garbage:", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	client.Del(ctx, rs.learnedKey(key))
	if err := client.Set(ctx, rs.learnedKey(key), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Learn(ctx, key, refused); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a key of another type: %v, want Redis's WRONGTYPE", err)
	}
	if !strings.Contains(log.String(), "WRONGTYPE") {
		t.Errorf("the log says nothing of the key of another type:\n%s", log.String())
	}

	// A transport on such a store goes on with its own state.
	api := startOK(t, 0)
	tr := ratewise.New(http.DefaultTransport, ratewise.WithStore(rs))
	defer tr.CloseIdleConnections()
	for range 5 {
		if err := get(tr, api.URL); err != nil {
			t.Errorf("a call while the store answers garbage: %v", err)
		}
	}

	client.Del(ctx, rs.learnedKey(key))
	rs = New(client, Options{Prefix: "garbage:"})
	if a, err := rs.Learn(ctx, key, refused); err != nil || !a.Paced {
		t.Errorf("once the key is fixed: %+v, %v; want it learned again", a, err)
	}
}
