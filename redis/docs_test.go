package redis_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestFleetsDocShowsTheExample holds each Go snippet of docs/fleets.md to
// the code of this package's examples, which compile and whose output is
// checked: a snippet is their lines, in order (indentation and the
// alignment of comments aside), and each import it names is theirs.
func TestFleetsDocShowsTheExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := "\n" + strings.Join(codeLines(string(src)), "\n") + "\n"
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) == 0 {
		t.Fatal("docs/fleets.md has no Go snippet")
	}
	for _, b := range blocks {
		var code []string
		inImport := false
		for _, line := range codeLines(b[1]) {
			switch {
			case line == "import (":
				inImport = true
			case inImport && line == ")":
				inImport = false
			case inImport || strings.HasPrefix(line, "import "):
				if spec := strings.TrimPrefix(line, "import "); !strings.Contains(examples, "\n"+spec+"\n") {
					t.Errorf("docs/fleets.md imports %s, which the examples do not", spec)
				}
			default:
				code = append(code, line)
			}
		}
		if !strings.Contains(examples, "\n"+strings.Join(code, "\n")+"\n") {
			t.Errorf("this snippet of docs/fleets.md is not the examples' code:\n%s", b[1])
		}
	}
}

// codeLines is text's lines without blanks, each trimmed and its runs of
// spaces and tabs made one space.
func codeLines(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.Join(strings.Fields(line), " "); line != "" {
			out = append(out, line)
		}
	}
	return out
}
