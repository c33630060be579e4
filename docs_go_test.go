package ratewise_test

import (
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

// This file finds the Go snippets of the doc comments and the Example
// and Test functions they must be the code of (docs_test.go has the rules).

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
	for _, pf := range parsedGoFiles(t, true) {
		file, src, fset, f := pf.name, pf.src, pf.fset, pf.f
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

// parsedGoFile is a .go file of the repository, read and parsed with its
// comments.
type parsedGoFile struct {
	name string
	src  []byte
	fset *token.FileSet
	f    *ast.File
}

// parsedGoFiles reads and parses what goFiles lists.
func parsedGoFiles(t *testing.T, tests bool) []parsedGoFile {
	t.Helper()
	var files []parsedGoFile
	for _, name := range goFiles(t, tests) {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, parsedGoFile{name: name, src: src, fset: fset, f: f})
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
	for _, pf := range parsedGoFiles(t, false) {
		file, src, fset, f := pf.name, pf.src, pf.fset, pf.f
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
