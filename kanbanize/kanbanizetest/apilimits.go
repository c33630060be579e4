package kanbanizetest

import "net/http"

// limitsAnswer tells the account its limits, as GET /api/v2/apiLimits
// does: {"data": [ApiLimit]}, each ApiLimit {"types": string, "limit":
// int}, the shape the API's OpenAPI document gives. It names no values
// of "types"; the fake says "minutely" and "hourly", after the
// endpoint's summary ("the hourly and minutely limits"). A limit the
// Config leaves at zero is not listed, so a fake without limits answers
// an empty list. The numbers are the Config's, or SetLimits', whatever the TimeScale.
func (s *Server) limitsAnswer() answer {
	type apiLimit struct {
		Types string `json:"types"`
		Limit int    `json:"limit"`
	}
	s.mu.Lock()
	perMinute, perHour := s.cfg.PerMinute, s.cfg.PerHour
	s.mu.Unlock()
	limits := []apiLimit{}
	if perMinute > 0 {
		limits = append(limits, apiLimit{Types: limitTypeMinute, Limit: perMinute})
	}
	if perHour > 0 {
		limits = append(limits, apiLimit{Types: limitTypeHour, Limit: perHour})
	}
	return jsonAnswer(http.StatusOK, mustData(limits))
}

// The "types" the fake gives its per-minute and per-hour limits. The
// API's documentation names none; a client should read any value that
// says minute or hour.
const (
	limitTypeMinute = "minutely"
	limitTypeHour   = "hourly"
)
