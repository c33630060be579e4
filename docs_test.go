package ratewise_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// snippet is a Go snippet and where a reader meets it.
type snippet struct {
	where string // "README.md:12", "admission/doc.go:9"
	code  string
}

// compiledIn says which function of funcs holds s, or, when none does,
// which came closest and where it parts from s.
func (s snippet) compiledIn(funcs []testFunc) error {
	lines, err := codeLines(s.code)
	if err != nil {
		return fmt.Errorf("%s: the snippet does not scan as Go: %v\n%s", s.where, err, s.code)
	}
	var imports, code []string
	inImport := false
	for _, l := range lines {
		switch {
		case l == "import (":
			inImport = true
		case inImport && l == ")":
			inImport = false
		case inImport:
			imports = append(imports, l)
		case strings.HasPrefix(l, "import "):
			imports = append(imports, strings.TrimPrefix(l, "import "))
		default:
			code = append(code, l)
		}
	}
	if len(code) == 0 {
		return fmt.Errorf("%s: the snippet has no code but imports", s.where)
	}
	var best struct {
		fn      *testFunc
		matched int
		at      int
	}
	for i := range funcs {
		fn := &funcs[i]
		for at := range fn.lines {
			n := 0
			for n < len(code) && at+n < len(fn.lines) && fn.lines[at+n] == code[n] {
				n++
			}
			if n == len(code) {
				var missing []string
				for _, imp := range imports {
					if !fn.imports[imp] {
						missing = append(missing, imp)
					}
				}
				if len(missing) == 0 {
					return nil
				}
				if best.matched <= n {
					best.fn, best.matched, best.at = fn, n, at
				}
				continue
			}
			if n > best.matched {
				best.fn, best.matched, best.at = fn, n, at
			}
		}
	}
	switch {
	case best.fn == nil:
		return fmt.Errorf("%s: no Example or Test function of the repository has this snippet's first line %q:\n%s", s.where, code[0], s.code)
	case best.matched == len(code):
		return fmt.Errorf("%s: %s in %s has this snippet's code, but its file does not import all of %q:\n%s",
			s.where, best.fn.name, best.fn.file, imports, s.code)
	default:
		got := "its end"
		if best.at+best.matched < len(best.fn.lines) {
			got = fmt.Sprintf("%q", best.fn.lines[best.at+best.matched])
		}
		return fmt.Errorf("%s: this snippet is the code of no Example or Test function; closest, %s in %s has its first %d lines, then %s where the snippet has %q:\n%s",
			s.where, best.fn.name, best.fn.file, best.matched, got, code[best.matched], s.code)
	}
}

// testFunc is an Example or Test function of a _test.go file.
type testFunc struct {
	file    string          // from the repository's root, with slashes
	name    string          // ExampleNew, TestX
	lines   []string        // its declaration's code lines, as codeLines makes them
	imports map[string]bool // its file's imports: `"path"`, or `name "path"`
	output  []string        // an Example's // Output:, trimmed lines; nil without one
}

// testFuncs parses every _test.go file of the repository, every module's.
func testFuncs(t *testing.T) []testFunc {
	t.Helper()
	var funcs []testFunc
	for _, file := range goFiles(t, true) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		imports := map[string]bool{}
		for _, imp := range f.Imports {
			spec := imp.Path.Value
			if imp.Name != nil {
				spec = imp.Name.Name + " " + spec
			}
			imports[spec] = true
		}
		outputs := map[string][]string{}
		for _, ex := range doc.Examples(f) {
			if ex.Output != "" || ex.EmptyOutput {
				outputs["Example"+ex.Name] = trimmedLines(ex.Output)
			}
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !(strings.HasPrefix(fd.Name.Name, "Example") || strings.HasPrefix(fd.Name.Name, "Test")) {
				continue
			}
			lines, err := codeLines(string(src[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset]))
			if err != nil {
				t.Fatalf("%s: %s: %v", file, fd.Name.Name, err)
			}
			name := fd.Name.Name
			funcs = append(funcs, testFunc{file: filepath.ToSlash(file), name: name, lines: lines, imports: imports, output: outputs[name]})
		}
	}
	return funcs
}

// codeLines is src's lines as Go tokens, each line its tokens joined by a
// space, without comments, blank lines and the semicolons Go inserts.
func codeLines(src string) ([]string, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("", -1, len(src))
	var errs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, []byte(src), func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	var lines []string
	var cur []string
	curLine := 0
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue
		}
		if line := file.Line(pos); line != curLine {
			if len(cur) > 0 {
				lines = append(lines, strings.Join(cur, " "))
			}
			cur, curLine = nil, line
		}
		if lit == "" {
			lit = tok.String()
		}
		cur = append(cur, lit)
	}
	if len(cur) > 0 {
		lines = append(lines, strings.Join(cur, " "))
	}
	return lines, errs.Err()
}

func mustCodeLines(t *testing.T, src string) []string {
	t.Helper()
	lines, err := codeLines(src)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// goFiles lists the repository's .go files, its _test.go files when
// tests is true, and the others otherwise; as the go command does, it
// leaves out testdata and directories whose name starts with "." or "_".
func goFiles(t *testing.T, tests bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != repoRoot && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && strings.HasSuffix(name, "_test.go") == tests {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// docCommentSnippets finds the Go code blocks of every doc comment go doc
// shows: the package's, and each declaration's, field's and method's of
// every non-test .go file. A block that is not Go and is not one of the
// kinds of block the rules let through is an error.
func docCommentSnippets(t *testing.T) ([]snippet, []error) {
	t.Helper()
	var snippets []snippet
	var errs []error
	for _, file := range goFiles(t, false) {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		var p comment.Parser
		for _, g := range docComments(f) {
			start := fset.Position(g.Pos()).Line
			for _, block := range p.Parse(g.Text()).Content {
				code, ok := block.(*comment.Code)
				if !ok {
					continue
				}
				where := fmt.Sprintf("%s:%d", filepath.ToSlash(file), blockLine(lines, start, code.Text))
				isGo, err := classifyDocBlock(code.Text)
				switch {
				case err != nil:
					errs = append(errs, fmt.Errorf("%s: %v:\n%s", where, err, code.Text))
				case isGo:
					snippets = append(snippets, snippet{where: where, code: code.Text})
				}
			}
		}
	}
	return snippets, errs
}

// blockLine is the line of a file's lines, from start on, where a doc
// comment's code block begins; start when it is not found.
func blockLine(lines []string, start int, block string) int {
	first, _, _ := strings.Cut(strings.TrimLeft(block, "\n"), "\n")
	for i := start - 1; i < len(lines); i++ {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "//") && strings.TrimSpace(strings.TrimPrefix(l, "//")) == strings.TrimSpace(first) {
			return i + 1
		}
	}
	return start
}

// docComments are the comments go doc shows of f.
func docComments(f *ast.File) []*ast.CommentGroup {
	groups := []*ast.CommentGroup{f.Doc}
	fields := func(l *ast.FieldList) {
		if l != nil {
			for _, fl := range l.List {
				groups = append(groups, fl.Doc)
			}
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			groups = append(groups, d.Doc)
		case *ast.GenDecl:
			groups = append(groups, d.Doc)
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					groups = append(groups, s.Doc)
					switch ty := s.Type.(type) {
					case *ast.StructType:
						fields(ty.Fields)
					case *ast.InterfaceType:
						fields(ty.Methods)
					}
				case *ast.ValueSpec:
					groups = append(groups, s.Doc)
				}
			}
		}
	}
	return slices.DeleteFunc(groups, func(g *ast.CommentGroup) bool { return g == nil })
}

var (
	goMarks = []*regexp.Regexp{
		regexp.MustCompile(`:=`),
		regexp.MustCompile(` = `),
		regexp.MustCompile(`(^|\s)//`),
		regexp.MustCompile(`[\pL\pN_)\]]\(`),
		regexp.MustCompile(`\{[^{}]*\b\w+: `),
	}
	commandPrefixes = []string{"$ ", "go ", "make ", "cd ", "curl "}
)

// classifyDocBlock says whether a doc comment's code block is Go, and
// returns an error for a block that is not and that the rules do not let
// through as a command, data or a table.
func classifyDocBlock(block string) (isGo bool, err error) {
	if parsesAsGo(block) {
		return true, nil
	}
	first := strings.TrimLeftFunc(block, unicode.IsSpace)
	for _, p := range commandPrefixes {
		if strings.HasPrefix(first, p) {
			return false, nil
		}
	}
	if first != "" && strings.ContainsRune("{[/<", rune(first[0])) {
		return false, nil
	}
	for _, line := range strings.Split(block, "\n") {
		for _, mark := range goMarks {
			if mark.MatchString(line) {
				return false, fmt.Errorf("the block is not Go (it does not parse), yet its line %q looks like Go (%s): fix the snippet", strings.TrimSpace(line), mark)
			}
		}
	}
	return false, nil
}

// parsesAsGo says whether block, its leading import lines apart, parses as
// statements or as declarations.
func parsesAsGo(block string) bool {
	var imports, rest []string
	lines := strings.Split(block, "\n")
	i := 0
	for ; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
			imports = append(imports, "")
		case l == "import (":
			for ; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
				imports = append(imports, lines[i])
			}
			imports = append(imports, ")")
		case strings.HasPrefix(l, "import "):
			imports = append(imports, l)
		default:
			rest = lines[i:]
			i = len(lines)
		}
	}
	head := "package p\n" + strings.Join(imports, "\n") + "\n"
	body := strings.Join(rest, "\n")
	for _, src := range []string{head + "func _() {\n" + body + "\n}\n", head + body + "\n"} {
		if _, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution); err == nil {
			return true
		}
	}
	return false
}

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
