package kanbanize_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/ratewise/ratewise/kanbanize"
	"github.com/ratewise/ratewise/kanbanize/kanbanizetest"
)

// TestForbiddenCard: a card the key's user may not see answers 403. Both
// reads fail with an error that is ErrForbidden, and no other sentinel,
// carries the body's details, and is not retried.
func TestForbiddenCard(t *testing.T) {
	read := map[string]func(c *kanbanize.Client) error{
		"ReadCard": func(c *kanbanize.Client) error {
			_, err := c.ReadCard(context.Background(), "105")
			return err
		},
		"ReadCardWithRetry": func(c *kanbanize.Client) error {
			_, err := c.ReadCardWithRetry(context.Background(), "105", quick)
			return err
		},
	}
	for name, read := range read {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cards := kanbanizetest.Fixtures(10)
				cards[5].Forbidden = true
				c, fake := newClient(t, kanbanizetest.Config{Cards: cards})
				err := read(c)
				var ae *kanbanize.APIError
				if !errors.Is(err, kanbanize.ErrForbidden) || !errors.As(err, &ae) {
					t.Fatalf("err = %v, want an *APIError matching ErrForbidden", err)
				}
				for _, other := range []error{kanbanize.ErrNotFound, kanbanize.ErrUnauthorized, kanbanize.ErrRateLimited} {
					if errors.Is(err, other) {
						t.Errorf("err = %v matches %v too", err, other)
					}
				}
				var details struct {
					CardID  int `json:"card_id"`
					BoardID int `json:"board_id"`
				}
				if jerr := json.Unmarshal(ae.Details, &details); jerr != nil || details.CardID != 105 || details.BoardID != cards[5].Card.BoardID {
					t.Errorf("details = %s (%v), want card 105 on board %d", ae.Details, jerr, cards[5].Card.BoardID)
				}
				if ae.StatusCode != 403 || ae.Code != "FB01" || !strings.Contains(err.Error(), `403 Forbidden (FB01)`) || !strings.Contains(err.Error(), `"card_id":105`) {
					t.Errorf("err = %v (status %d, code %q), want it to say 403 FB01 and the details", err, ae.StatusCode, ae.Code)
				}
				if n := fake.Stats().Requests; n != 1 {
					t.Errorf("%d requests, want 1: a 403 is not retried", n)
				}
			})
		})
	}
}
