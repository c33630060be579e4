package providers_test

import (
	"fmt"
	"io"
	"net/http"

	"github.com/jarcoal/httpmock"

	"github.com/ratewise/ratewise"
	"github.com/ratewise/ratewise/providers"
)

// A client of TMDB, paced under its published limit. The base is a fake
// of the API; in production it is nil, for http.DefaultTransport.
func Example() {
	api := httpmock.NewMockTransport()
	api.RegisterResponder("GET", "https://api.themoviedb.org/3/movie/550",
		httpmock.NewStringResponder(200, `{"title":"Fight Club"}`))
	client := &http.Client{Transport: ratewise.New(api, ratewise.WithLimit(providers.TMDB()))}

	resp, err := client.Get("https://api.themoviedb.org/3/movie/550")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))

	l := providers.TMDB()
	fmt.Printf("%s: %d at once, then %.1f a second\n", l.Name, l.Burst, float64(l.Rate))
	// Output:
	// 200 {"title":"Fight Club"}
	// tmdb: 5 at once, then 3.5 a second
}

// One client for two APIs: each limit's Applies picks its API's requests,
// so that TMDB's pace does not hold back MusicBrainz, nor the reverse.
func Example_severalAPIs() {
	host := func(h string) func(*http.Request) bool {
		return func(req *http.Request) bool { return req.URL.Host == h }
	}
	tmdb := providers.TMDB()
	tmdb.Applies = host("api.themoviedb.org")
	musicbrainz := providers.MusicBrainz()
	musicbrainz.Applies = host("musicbrainz.org")

	api := httpmock.NewMockTransport()
	api.RegisterNoResponder(httpmock.NewStringResponder(200, "ok"))
	client := &http.Client{Transport: ratewise.New(api, ratewise.WithLimit(tmdb), ratewise.WithLimit(musicbrainz))}

	for _, url := range []string{
		"https://api.themoviedb.org/3/movie/550",
		"https://musicbrainz.org/ws/2/artist/5b11f4ce-a62d-471e-81fc-a69a8278c7da",
	} {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("User-Agent", "example/1.0 (ops@example.com)")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(req.URL.Host, resp.StatusCode)
	}
	// Output:
	// api.themoviedb.org 200
	// musicbrainz.org 200
}

// A transport for TMDB on http.DefaultTransport (a nil base): its one
// scope is TMDB's published limit, which no request passes, and the pace
// it learns stays under it.
func ExampleTMDB() {
	tr := ratewise.New(nil, ratewise.WithLimit(providers.TMDB()))

	for _, l := range tr.Limits() {
		if l.Adaptive {
			fmt.Println(l.Name + ": the pace learned from TMDB's answers, under it")
			continue
		}
		fmt.Printf("%s: %d at once, then %.1f a second\n", l.Name, l.Burst, float64(l.Rate))
	}
	// Output:
	// tmdb: 5 at once, then 3.5 a second
	// learned: the pace learned from TMDB's answers, under it
}
