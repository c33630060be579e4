package kanbanize

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrBadCardID is matched by the error of a card reference that is neither
// a card number nor a card URL.
var ErrBadCardID = errors.New("kanbanize: not a card ID or card URL")

// ParseCardID reads what a user pastes as a card: its number ("345"), or
// a card URL of a Kanbanize or Businessmap account, such as
// https://acme.kanbanize.com/ctrl_board/12/cards/345/details/ or
// https://x.businessmap.io/ctrl_board/8/cards/1. Anything else is an error
// matching ErrBadCardID, found before any request is sent.
func ParseCardID(s string) (ID, error) {
	id, _, err := parseCardRef(s)
	return id, err
}

// parseCardRef is ParseCardID, which also returns the account subdomain of
// a card URL ("" for a number).
func parseCardRef(s string) (ID, string, error) {
	s = strings.TrimSpace(s)
	if id, ok := parseNumber(s); ok {
		return id, "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
		return 0, "", badCardID(s)
	}
	sub, ok := accountOf(u.Hostname())
	if !ok {
		return 0, "", badCardID(s)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "cards" {
			if id, ok := parseNumber(parts[i+1]); ok {
				return id, sub, nil
			}
			break
		}
	}
	return 0, "", badCardID(s)
}

func badCardID(s string) error {
	const most = 80 // the message quotes the input, not a pasted essay
	if len(s) > most {
		s = s[:most] + "…"
	}
	return fmt.Errorf("%w: %q (want a number like 345 or a card URL like https://acme.kanbanize.com/ctrl_board/12/cards/345/details/)", ErrBadCardID, withoutSecrets(s))
}

// withoutSecrets drops the user info and query of a pasted URL, which may
// carry a token; by text when the URL does not parse, as a bad escape
// elsewhere in it makes it.
func withoutSecrets(s string) string {
	if u, err := url.Parse(s); err == nil {
		if u.User != nil || u.RawQuery != "" {
			return u.Scheme + "://" + u.Host + u.Path
		}
		return s
	}
	s, _, _ = strings.Cut(s, "?")
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		end := strings.IndexAny(rest, "/#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			s = scheme + "://" + rest[at+1:]
		}
	}
	return s
}

// parseNumber accepts a positive decimal card number.
func parseNumber(s string) (ID, bool) {
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return ID(n), true
}

// accountOf returns the account subdomain of a Kanbanize or Businessmap
// host, and false for any other host. acme.kanbanize.com and
// acme.businessmap.io are the same account.
func accountOf(host string) (string, bool) {
	host = strings.ToLower(host)
	for _, domain := range []string{".kanbanize.com", ".businessmap.io"} {
		if sub, ok := strings.CutSuffix(host, domain); ok && validSubdomain(sub) {
			return sub, true
		}
	}
	return "", false
}

func validSubdomain(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
