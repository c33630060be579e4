// Package providers holds the published rate limits of named APIs, each
// as a [ratewise.Limit] to give to [ratewise.WithLimit]:
//
//	tr := ratewise.New(nil, ratewise.WithLimit(providers.TMDB()))
//
// A limit whose API counts requests in a window ("40 every 10 seconds")
// is a token bucket that never lets more than that number start in any
// such window: a burst of an eighth of the number, and the rest spread
// over the window, so that its sustained rate is 7/8 of the published
// one. Each function's doc links to the page its numbers come from, and
// each limit's Name (the function's name in lower case) labels its scope
// in statuses and errors.
//
// Like any Limit, one of these paces every request of its transport, per
// host. A transport that calls several APIs sets each limit's Applies to
// the requests of its API (see the example).
//
// # Adding a provider
//
// A provider is a function named after the service, without a "Limit"
// suffix, that returns a ratewise.Limit built from the service's
// published numbers (perWindow for a count per window), and whose doc
// says the numbers, who they apply to (per IP address, per API key) and
// the URL of their source. Its test is a row in providers_test.go's table
// of limits that must hold their windows, or, for a limit that is not a
// count per window, a test of its own.
package providers

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/ratewise/ratewise"
)

// perWindow is a bucket that never lets more than n requests start in any
// window of w: a burst of b, an eighth of n, and n − b more spread over
// the window. Its sustained rate is 7/8 of n per w, the price of never
// going over.
func perWindow(name string, n int, w time.Duration) ratewise.Limit {
	b := max(n/8, 1)
	return ratewise.Limit{Name: name, Rate: rate.Limit(float64(n-b) / w.Seconds()), Burst: b}
}

// TMDB is The Movie Database's published limit, 40 requests every 10
// seconds per IP address, as a bucket that never lets more through in any
// 10 seconds. https://developer.themoviedb.org/docs/rate-limiting (TMDB
// has since relaxed it to about 50 a second; 40 per 10 s stays safe).
func TMDB() ratewise.Limit { return perWindow("tmdb", 40, 10*time.Second) }

// MusicBrainz is MusicBrainz's limit: one request a second per IP
// address, no burst; going over it may get the address blocked. The
// service also asks every client to send a meaningful User-Agent.
// https://musicbrainz.org/doc/MusicBrainz_API/Rate_Limiting
func MusicBrainz() ratewise.Limit {
	return ratewise.Limit{Name: "musicbrainz", Rate: 1, Burst: 1}
}

// Fanart is FanArt.tv's limit for a project API key, 10 requests a
// second, or 20 with a user's personal key, which lifts the limits of the
// project's. https://fanart.tv/api-docs/ and
// https://fanart.tv/get-an-api-key/
func Fanart(personalKey bool) ratewise.Limit {
	if personalKey {
		return perWindow("fanart", 20, time.Second)
	}
	return perWindow("fanart", 10, time.Second)
}

// TheAudioDB is TheAudioDB's free-tier limit: 30 requests a minute.
// https://www.theaudiodb.com/free_music_api
func TheAudioDB() ratewise.Limit { return perWindow("theaudiodb", 30, time.Minute) }

// GitHub is the GitHub REST API's primary limit for an authenticated
// client: 5,000 requests an hour, with at most 100 in flight. GitHub
// counts the quota in X-RateLimit-* headers, so the limit is adaptive: it
// sends what the hour has left and then waits for its reset, never faster
// than its ceiling of 5,000 an hour.
// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api
func GitHub() ratewise.Limit {
	return ratewise.Limit{Name: "github", Adaptive: true, Rate: rate.Every(time.Hour / 5000), MaxConcurrent: 100}
}
