package ratewise

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// figuref reports a figure a simulation in fake time missed (a time
// against the ideal, a count of refusals): an error in a plain run, a
// log line under the race detector. Its scheduler wakes the goroutines
// due at one instant of fake time in a shuffled order, which moves a
// refusal or two, so that a figure held to the letter fails a few runs
// in a hundred; make test runs the tests that hold figures without -race
// too (-figures), where the figures are held. What no order excuses (a
// failed call) is an error in both.
func figuref(t *testing.T, format string, args ...any) {
	t.Helper()
	if raceEnabled {
		t.Logf("a figure missed under -race, held in the plain run: "+format, args...)
		return
	}
	t.Errorf(format, args...)
}

// holdsInTwoOfThree runs a simulation in fake time, run, which reports
// what it measured and whether its figures held: once and, when they
// missed, twice more. figuref reports the runs that missed when two of
// the three did: the order fake time wakes one instant's goroutines in
// moves a refusal or two, and the odd run past a figure held to the
// letter says nothing of a change, while a change that moves the figures
// misses in most runs. What run asserts beyond its figures (no call
// failed) it reports itself, in every run.
func holdsInTwoOfThree(t *testing.T, run func() (measured string, held bool)) {
	t.Helper()
	measured, held := run()
	if held {
		return
	}
	missed := []string{measured}
	for range 2 {
		if measured, held := run(); !held {
			missed = append(missed, measured)
		}
	}
	if len(missed) >= 2 {
		figuref(t, "missed in %d of 3 runs: %s", len(missed), strings.Join(missed, "; "))
	}
}

// figuresOnly runs the tests that hold a figure alone: make test's plain
// run, which the race detector's run of every test precedes.
var figuresOnly = flag.Bool("figures", false, "run only the tests that hold a figure (call figuref), as make test's run without -race does")

// figureTests returns a -run pattern that matches the package's tests
// that hold a figure: those whose body calls figuref, directly or
// through a function of the test files that does.
func figureTests() (string, error) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		return "", err
	}
	calls := map[string][]string{} // a function of the test files: what it calls by name
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return "", err
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok {
					if id, ok := call.Fun.(*ast.Ident); ok {
						calls[fn.Name.Name] = append(calls[fn.Name.Name], id.Name)
					}
				}
				return true
			})
		}
	}
	holds := map[string]bool{"figuref": true}
	for changed := true; changed; {
		changed = false
		for fn, callees := range calls {
			if !holds[fn] && slices.ContainsFunc(callees, func(c string) bool { return holds[c] }) {
				holds[fn], changed = true, true
			}
		}
	}
	var tests []string
	for fn := range holds {
		if strings.HasPrefix(fn, "Test") {
			tests = append(tests, fn)
		}
	}
	slices.Sort(tests)
	return "^(" + strings.Join(tests, "|") + ")$", nil
}

func TestFigureTestsAreFound(t *testing.T) {
	pattern, err := figureTests()
	if err != nil {
		t.Fatal(err)
	}
	// One that calls figuref, one that calls it through testLearnedPace,
	// and one that holds no figure.
	for name, want := range map[string]bool{
		"TestSlowStartCostsOneRoundTripOfRefusals": true,
		"TestLearnedPaceOnEveryModel":              true,
		"TestMaxAttemptsReturnsLastResponse":       false,
	} {
		if got := strings.Contains(pattern, "|"+name+"|") || strings.Contains(pattern, "("+name+"|") || strings.Contains(pattern, "|"+name+")"); got != want {
			t.Errorf("%s in the figures' pattern: %v, want %v (%s)", name, got, want, pattern)
		}
	}
}
