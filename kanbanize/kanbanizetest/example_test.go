package kanbanizetest_test

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

func ExampleServer_Transport() {
	s := kanbanizetest.New(kanbanizetest.Config{})
	client := &http.Client{Transport: s.Transport()} // no network

	// get decodes the "data" of GET path into v.
	get := func(path string, v any) error {
		req, err := http.NewRequest(http.MethodGet, "https://example.kanbanize.com/api/v2"+path, nil)
		if err != nil {
			return err
		}
		req.Header.Set("apikey", kanbanizetest.DefaultAPIKey)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&struct{ Data any }{v})
	}

	var card struct{ Title string }
	var comments []struct {
		CommentID int `json:"comment_id"`
	}
	if err := get("/cards/102", &card); err != nil {
		fmt.Println(err)
		return
	}
	if err := get("/cards/102/comments", &comments); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %d comments\n", card.Title, len(comments))
	// Output:
	// Migrate invoices to the new schema: 2 comments
}
