package kanbanizetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratewise/ratewise/internal/fakehttp"
)

// Stats counts what a [Server] did.
type Stats struct {
	// Requests counts every request, whatever its path, method or key.
	Requests int `json:"requests"`
	// ByEndpoint counts the requests whose path names each endpoint,
	// whatever their method or key. It always has every endpoint.
	ByEndpoint map[Endpoint]int `json:"by_endpoint"`
	// Limited counts rate-limit refusals, scripted or by a limit.
	Limited int `json:"limited"`
	// Faults counts scripted faults other than Fault429 and FaultRL02.
	Faults int `json:"faults"`
	// Unauthorized counts 401 answers.
	Unauthorized int `json:"unauthorized"`
}

// Server is a fake Kanbanize API v2. Make it with [New]; use it in-process
// through [Server.Transport] or [Server.Handler], or on loopback through
// [Server.Start] and [Server.Close]. A Server is safe for concurrent use.
type Server struct {
	cfg   Config
	keys  [][]byte        // the accepted keys: APIKey, then APIKeys
	cards map[int]*served // read-only after New
	done  chan struct{}   // closed by Close to cut loopback latency waits short
	refs  atomic.Uint64   // numbers the error references

	closeOnce sync.Once

	mu       sync.Mutex
	stats    Stats               // guarded by mu; so are cfg's PerMinute and PerHour (SetLimits)
	scriptAt map[Endpoint]int    // guarded by mu
	buckets  map[string]*buckets // guarded by mu
	ts       *httptest.Server    // guarded by mu
	closed   bool                // guarded by mu
}

// served is one card with its three bodies encoded once, up front.
type served struct {
	fixture CardFixture
	body    map[Endpoint][]byte
}

// New returns a fake API described by cfg, serving in-process; call
// [Server.Start] to serve on loopback as well. It panics with the error of
// [Config.Validate] when cfg is invalid.
func New(cfg Config) *Server {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.APIKey == "" {
		cfg.APIKey = DefaultAPIKey
	}
	if cfg.Cards == nil {
		cfg.Cards = Fixtures(DefaultCards)
	}
	// Own copies, so that the caller changing its config later cannot race
	// with the server.
	cfg.APIKeys = slices.Clone(cfg.APIKeys)
	cfg.Scripts = maps.Clone(cfg.Scripts)
	for e, script := range cfg.Scripts {
		cfg.Scripts[e] = cloneSlice(script)
	}
	s := &Server{
		cfg:      cfg,
		keys:     [][]byte{[]byte(cfg.APIKey)},
		cards:    make(map[int]*served, len(cfg.Cards)),
		done:     make(chan struct{}),
		scriptAt: make(map[Endpoint]int),
		buckets:  make(map[string]*buckets),
		stats:    Stats{ByEndpoint: make(map[Endpoint]int)},
	}
	for _, k := range cfg.APIKeys {
		s.keys = append(s.keys, []byte(k))
	}
	for _, e := range endpoints {
		s.stats.ByEndpoint[e] = 0
	}
	for _, fx := range cfg.Cards {
		fx = fx.clone()
		sv := &served{fixture: fx, body: map[Endpoint][]byte{
			EndpointCard:     mustData(fx.Card),
			EndpointComments: mustData(fx.Comments),
			EndpointSubtasks: mustData(fx.Subtasks),
		}}
		s.cards[fx.Card.CardID] = sv
	}
	s.cfg.Cards = nil // served from s.cards from now on
	return s
}

// mustData encodes {"data": v}. Validate has checked that the cards
// encode, and comments and subtasks always do.
func mustData(v any) []byte {
	b, err := json.Marshal(struct {
		Data any `json:"data"`
	}{v})
	if err != nil {
		panic("kanbanizetest: " + err.Error())
	}
	return b
}

// Card returns the fixture of card id, as served, and whether there is
// one. The result shares no slice with the server.
func (s *Server) Card(id int) (CardFixture, bool) {
	sv, ok := s.cards[id]
	if !ok {
		return CardFixture{}, false
	}
	return sv.fixture.clone(), true
}

// SetLimits changes the server's limits to perMinute requests a minute
// and perHour an hour, as when the account's plan changes: from now on
// every key's buckets (the account's, with PerAccount) refill at the new
// rates and hold at most the new quotas, keeping the tokens they have up
// to those, and GET /api/v2/apiLimits tells the new limits. Zero is no
// limit of that window. It panics on a negative count.
func (s *Server) SetLimits(perMinute, perHour int) {
	if perMinute < 0 || perHour < 0 {
		panic(fmt.Sprintf("kanbanizetest: SetLimits(%d, %d): use 0 for no limit or a positive count", perMinute, perHour))
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.PerMinute, s.cfg.PerHour = perMinute, perHour
	for _, b := range s.buckets {
		b.set(perMinute, perHour, now)
	}
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.ByEndpoint = maps.Clone(s.stats.ByEndpoint)
	return st
}

// Handler returns the fake as an [http.Handler], for mounting in a server
// of your own. FaultReset needs a ResponseWriter that can be hijacked, and
// a request whose context ends during the latency gets no answer: in both
// cases the handler panics with [http.ErrAbortHandler].
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serveHTTP(w, r, nil)
	})
}

// Start starts serving on a loopback address, once, and returns the base
// URL, such as "http://127.0.0.1:41234"; clients append "/api/v2/…".
// Later calls return the same URL. Start panics when called after
// [Server.Close] or when it cannot listen on 127.0.0.1.
func (s *Server) Start() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		panic("kanbanizetest: Start called after Close; make a new Server with New")
	}
	if s.ts == nil {
		s.ts = fakehttp.StartLoopback("kanbanizetest", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serveHTTP(w, r, s.done)
		}))
	}
	return s.ts.URL
}

// Close stops the loopback server, if started, after cutting short the
// latency waits of its requests in flight. It may be called more than
// once. The in-process Transport and Handler keep working.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	ts := s.ts
	s.mu.Unlock()
	s.closeOnce.Do(func() {
		close(s.done)
		if ts != nil {
			ts.Close()
		}
	})
}

// serveHTTP answers r on w. stop, when closed, cuts the latency short.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, stop <-chan struct{}) {
	a, err := s.respond(r, stop)
	if err != nil {
		// The client is gone or the server is closing: drop the connection
		// rather than let net/http send an empty 200.
		panic(http.ErrAbortHandler)
	}
	if a.reset {
		fakehttp.Reset(w)
		return
	}
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}
