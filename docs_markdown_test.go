package ratewise_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// This file reads the Markdown pages: their fenced blocks, links and
// headings (docs_test.go has the rules).

// markdownPages are README.md and docs/*.md.
func markdownPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
}

// fence is a fenced block of a Markdown page.
type fence struct {
	line   int    // the line of its opening fence
	info   string // its language: go, sh, json, text
	body   string
	output string // "FILE FUNC" when marked as an Example's output
}

func readFences(page string) ([]fence, []error) {
	b, err := os.ReadFile(page)
	if err != nil {
		return nil, []error{err}
	}
	return parseFences(page, string(b))
}

var outputMarker = regexp.MustCompile(`^<!-- output: (\S+ \w+) -->$`)

// parseFences reads the fenced blocks of a page: each opens with ``` and
// its language, and closes with ```; a list item's indentation is taken
// off its lines.
func parseFences(page, text string) ([]fence, []error) {
	var fences []fence
	var errs []error
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		opener := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(opener, "```") {
			continue
		}
		indent := len(lines[i]) - len(opener)
		f := fence{line: i + 1, info: strings.TrimSpace(strings.TrimLeft(opener, "`"))}
		if i > 0 {
			if m := outputMarker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				f.output = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			l := lines[i]
			if len(l)-len(strings.TrimLeft(l, " ")) >= indent {
				l = l[indent:]
			}
			body = append(body, l)
		}
		if i == len(lines) {
			errs = append(errs, fmt.Errorf("%s:%d: the fence is never closed", page, f.line))
		}
		if f.info == "" {
			errs = append(errs, fmt.Errorf("%s:%d: the fenced block names no language: ```go is compiled by a test, ```text, ```sh or ```json is not", page, f.line))
		}
		f.body = strings.Join(body, "\n")
		fences = append(fences, f)
	}
	return fences, errs
}

// proseOf is a page without its fenced blocks and code spans, where a
// link is not one.
func proseOf(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	inFence := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimLeft(l, " "), "```") {
			inFence = !inFence
			continue
		}
		if !inFence {
			out = append(out, l)
		}
	}
	return regexp.MustCompile("`[^`]*`").ReplaceAllString(strings.Join(out, "\n"), "")
}

// headingAnchors are the anchors GitHub makes of a page's headings.
func headingAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(proseOf(t, page), "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		slug := slugOf(strings.TrimLeft(l, "#"))
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// slugOf is GitHub's anchor of a heading: lower case, its punctuation
// gone but hyphens and underscores, each space a hyphen.
func slugOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// trimmedLines is text's lines, each trimmed, without the blank ones at
// either end.
func trimmedLines(text string) []string {
	var out []string
	for _, l := range strings.Split(strings.Trim(text, "\n"), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return out
}

// jsonPrinted says whether the JSON of doc is, spacing aside, one line of
// output or the whole of it.
func jsonPrinted(doc string, output []string) bool {
	var want bytes.Buffer
	if json.Compact(&want, []byte(doc)) != nil {
		return false
	}
	for _, printed := range append(output, strings.Join(output, "\n")) {
		var got bytes.Buffer
		if json.Compact(&got, []byte(printed)) == nil && bytes.Equal(got.Bytes(), want.Bytes()) {
			return true
		}
	}
	return false
}

// containsRun says whether want is consecutive lines of have.
func containsRun(have, want []string) bool {
	for i := 0; i+len(want) <= len(have); i++ {
		if slices.Equal(have[i:i+len(want)], want) {
			return true
		}
	}
	return false
}
