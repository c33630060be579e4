package ratewise_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file holds the documentation to the code. Every Go snippet a reader
// meets, in README.md, in docs/*.md and in the doc comments of every
// package of the repository (go doc's), is the code of an Example or Test
// function of some _test.go file of the repository: go vet and go test
// compile it there, and an Example's // Output: checks what it prints.
// What a page shows as a program's output is that output. Every relative
// link of the pages resolves, and README.md stays short.
//
// A snippet matches a function when its lines, each reduced to its Go
// tokens (so that spacing, the alignment gofmt gives and comments do not
// count), are consecutive lines of the function's declaration, and each
// import it names the function's file imports under the same name.
//
// Which blocks are Go:
//
//   - In Markdown, every fenced block says what it holds: a ```go block
//     is Go; any other (```sh, ```json, ```text) is not. A fence with no
//     language is an error, so that no Go can hide in one unchecked.
//   - In a doc comment, a code block is Go when it parses as Go (import
//     lines, then statements or declarations). One that does not must be
//     a command (its first line starts with "$ ", "go ", "make ", "cd " or
//     "curl "), data (its first character is one of `{[/<`), or a table or
//     an output whose lines carry none of Go's marks: ":=", " = ", a
//     comment ("//" at the start of a line or after a space), a call (a
//     letter, digit, "_", ")" or "]" right before "("), or a composite
//     literal's field ("{" then "Name: " before "}"). Any other block is
//     an error: a Go snippet that no longer parses fails here rather than
//     being taken for a table.
//
// A fenced block right after a line "<!-- output: FILE FUNC -->" is the
// output of the Example FUNC in FILE (a path from the repository's root):
// its lines, trimmed, are consecutive lines of that Example's // Output:;
// for a ```json block, its JSON is, spacing aside, one line of the
// output or the whole of it.

// repoRoot is the repository's root: the root module's directory, where
// this test runs.
const repoRoot = "."

// TestDocSnippetsAreCompiled holds every Go snippet of README.md,
// docs/*.md and the packages' doc comments to an Example or Test function.
func TestDocSnippetsAreCompiled(t *testing.T) {
	funcs := testFuncs(t)
	var snippets []snippet
	for _, page := range markdownPages(t) {
		fences, errs := readFences(page)
		for _, err := range errs {
			t.Error(err)
		}
		for _, f := range fences {
			if f.info == "go" {
				snippets = append(snippets, snippet{where: fmt.Sprintf("%s:%d", page, f.line), code: f.body})
			}
		}
	}
	doc, errs := docCommentSnippets(t)
	for _, err := range errs {
		t.Error(err)
	}
	snippets = append(snippets, doc...)
	if len(snippets) < 10 {
		t.Fatalf("found %d Go snippets, fewer than the pages hold: is the walk broken?", len(snippets))
	}
	for _, s := range snippets {
		if err := s.compiledIn(funcs); err != nil {
			t.Error(err)
		}
	}
}

// TestDocOutputsArePrinted holds each block marked as an Example's output
// to what the Example prints.
func TestDocOutputsArePrinted(t *testing.T) {
	funcs := testFuncs(t)
	marked := 0
	for _, page := range markdownPages(t) {
		fences, _ := readFences(page)
		for _, f := range fences {
			if f.output == "" {
				continue
			}
			marked++
			file, name, _ := strings.Cut(f.output, " ")
			i := slices.IndexFunc(funcs, func(fn testFunc) bool { return fn.file == file && fn.name == name })
			if i < 0 || funcs[i].output == nil {
				t.Errorf("%s:%d: the block is marked as the output of %s in %s, which has no such Example with an // Output:", page, f.line, name, file)
				continue
			}
			if f.info == "json" {
				if !jsonPrinted(f.body, funcs[i].output) {
					t.Errorf("%s:%d: the JSON is not what %s in %s prints; its // Output: is:\n%s",
						page, f.line, name, file, strings.Join(funcs[i].output, "\n"))
				}
				continue
			}
			want := trimmedLines(f.body)
			if !containsRun(funcs[i].output, want) {
				t.Errorf("%s:%d: the block is not what %s in %s prints; its // Output: is:\n%s",
					page, f.line, name, file, strings.Join(funcs[i].output, "\n"))
			}
		}
	}
	if marked == 0 {
		t.Error("no block is marked as an Example's output: is the marker <!-- output: FILE FUNC --> still read?")
	}
}

// TestDocLinksResolve follows every relative link of README.md and
// docs/*.md: its file or directory exists, and its #anchor is a heading
// of the page it names.
func TestDocLinksResolve(t *testing.T) {
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	links := 0
	for _, page := range markdownPages(t) {
		text := proseOf(t, page)
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			file, anchor, _ := strings.Cut(target, "#")
			resolved := page
			if file != "" {
				resolved = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s: the link %s names %s, which does not exist", page, target, filepath.ToSlash(resolved))
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(resolved, ".md") {
				t.Errorf("%s: the link %s has an anchor into a file that is not Markdown", page, target)
				continue
			}
			if anchors := headingAnchors(t, resolved); !anchors[anchor] {
				t.Errorf("%s: the link %s names #%s, which no heading of %s makes", page, target, anchor, filepath.ToSlash(resolved))
			}
		}
	}
	if links == 0 {
		t.Error("no relative link found: is the pattern broken?")
	}
}

// TestReadmeIsShort keeps README.md a page read in ten minutes: the rest
// is in docs/.
func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 300 {
		t.Errorf("README.md has %d lines, more than 300: move a topic to docs/", n)
	}
}

// TestDocSnippetRules checks the rules above on blocks made for it, so that
// a rule that stops catching what it should fails here.
func TestDocSnippetRules(t *testing.T) {
	funcs := []testFunc{{file: "x_test.go", name: "ExampleX",
		imports: map[string]bool{`"github.com/ratewise/ratewise"`: true, `rwredis "github.com/ratewise/ratewise/redis"`: true},
		lines:   mustCodeLines(t, "func ExampleX() {\n\ttr := ratewise.New(nil,\n\t\tratewise.WithRetry(ratewise.RetryPolicy{}), // retries\n\t)\n\t_ = tr\n}")}}
	for _, tt := range []struct {
		code string
		ok   bool
	}{
		{"tr := ratewise.New(nil,\n    ratewise.WithRetry(ratewise.RetryPolicy{}),\n)", true},
		{"tr := ratewise.New(nil,\n\tratewise.WithRetry(ratewise.RetryPolicy{}), // a comment of the doc's own\n)", true},
		{`import "github.com/ratewise/ratewise"` + "\n\ntr := ratewise.New(nil,", true},
		{"import (\n\trwredis \"github.com/ratewise/ratewise/redis\"\n)\n_ = tr", true},
		{`import redis "github.com/ratewise/ratewise/redis"` + "\n_ = tr", false},
		{"tr := ratewise.New(nil, ratewise.WithRetry(ratewise.RetryPolicy{}))", false},
		{"ratewise.WithRetry(ratewise.RetryPolicy{}),\n_ = tr", false},
	} {
		err := snippet{where: "case", code: tt.code}.compiledIn(funcs)
		if (err == nil) != tt.ok {
			t.Errorf("compiledIn(%q) = %v, want ok %v", tt.code, err, tt.ok)
		}
	}
	for _, tt := range []struct {
		block  string
		isGo   bool
		reason string // "" when the block is Go or passes as not Go
	}{
		{"tr := ratewise.New(nil)\n", true, ""},
		{"import rwotel \"github.com/ratewise/ratewise/otel\"\n\ntr := rwotel.New(nil, rwotel.Config{})\n", true, ""},
		{"func TestX(t *testing.T) {\n\tt.Log(1)\n}\n", true, ""},
		{"go run ./cmd/fleet [-scenario regexp]\n", false, ""},
		{"{\"calls\": 1}\n", false, ""},
		{"ratewise_calls_total    calls\nratewise_waits_total{kind}    waits\n", false, ""},
		{"token bucket, GCRA   (N − B) / R\nsliding window       (N − ½) · W / L, about\n", false, ""},
		{"tr := ratewise.New(nil\n", false, "not Go"},                                          // a call that lost its parenthesis
		{"h, err = admission.New(api,\n", false, "not Go"},                                     // an assignment
		{"ratewise.Limit{Rate: 5 Burst: 1}\n", false, "not Go"},                                // a field
		{"client.Get(url)    // the call\nclient.Get(url))   // once more\n", false, "not Go"}, // a comment
	} {
		isGo, err := classifyDocBlock(tt.block)
		if isGo != tt.isGo || (err == nil) != (tt.reason == "") {
			t.Errorf("classifyDocBlock(%q) = %v, %v; want Go %v, error %v", tt.block, isGo, err, tt.isGo, tt.reason != "")
		}
	}
	fences, errs := parseFences("p.md", "text\n```go\nx := 1\n```\n<!-- output: a_test.go ExampleA -->\n```text\nhi\n```\n```\nno language\n```\n")
	if len(fences) != 3 || fences[0].info != "go" || fences[1].output != "a_test.go ExampleA" || len(errs) != 1 {
		t.Errorf("parseFences = %+v, %v; want a go block, a marked output and one error for the fence with no language", fences, errs)
	}
	if got := slugOf("Several processes: one client through Redis"); got != "several-processes-one-client-through-redis" {
		t.Errorf("slugOf = %q", got)
	}
}
