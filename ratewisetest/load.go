package ratewisetest

import (
	"math/rand/v2"
	"time"
)

// This file holds the models that meter no quota over time:
// ConcurrencyCap and LoadShed.

// places is the state of ConcurrencyCap: the requests of a key being
// served. The zero state serves none and admits none.
type places struct {
	limit    int
	inFlight int // admitted and not yet answered
}

func (p *places) take(time.Time) verdict {
	v := verdict{admitted: p.inFlight < p.limit}
	if v.admitted {
		p.inFlight++
	}
	v.remaining = p.limit - p.inFlight
	return v
}

// release frees the place of a request that was admitted and is now
// answered or abandoned.
func (p *places) release() { p.inFlight-- }

// holder is the state of a model whose admitted requests hold something
// until they are answered, which the server gives back then. Its caller
// serializes calls, as for take.
type holder interface {
	release()
}

// shedStream is the random stream LoadShed draws from, beside the fault
// (1) and jitter (2) streams of the same seed, so that shedding does not
// change which requests get faults.
const shedStream = 3

// shedder is the state of LoadShed: a share of requests refused at
// random. Its draws may be shared by every key; its caller serializes
// calls, as for take.
type shedder struct {
	share float64
	draws *rand.Rand
}

func (s *shedder) take(time.Time) verdict {
	return verdict{admitted: s.draws.Float64() >= s.share}
}
