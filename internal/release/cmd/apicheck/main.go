// Command apicheck reports the changes to each published module's API
// since its last release (its newest tag, such as redis/v0.1.0), with
// golang.org/x/exp/apidiff, and fails on an incompatible one unless the
// release CHANGELOG.md names next allows it: a new major version, or a
// new minor one before v1.
//
// Usage, from the repository's root: go run ./internal/release/cmd/apicheck
// (make lint). A module with no release yet is reported and skipped.
package main

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"

	"github.com/ratewise/ratewise/internal/release"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("apicheck: ")
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	mods, err := release.Next(root, release.Published)
	if err != nil {
		log.Fatal(err)
	}
	failed := false
	for _, m := range mods {
		next := m.Version
		prefix := strings.TrimSuffix(m.Tag, next)
		last := lastTag(root, prefix)
		if last == "" {
			fmt.Printf("== %s: no release yet, nothing to compare\n", m.Path)
			continue
		}
		lastVersion := strings.TrimPrefix(last, prefix)
		old, err := checkout(root, last)
		if err != nil {
			log.Fatal(err)
		}
		rel, _ := filepath.Rel(root, m.Dir)
		before, err := load(filepath.Join(old, rel), m.Path)
		os.RemoveAll(old)
		if err != nil {
			log.Fatalf("%s at %s: %v", m.Path, last, err)
		}
		after, err := load(m.Dir, m.Path)
		if err != nil {
			log.Fatalf("%s: %v", m.Path, err)
		}
		report := apidiff.ModuleChanges(before, after)
		var breaking []string
		for _, c := range report.Changes {
			if !c.Compatible {
				breaking = append(breaking, c.Message)
			}
		}
		allowed := breakingAllowed(lastVersion, next)
		fmt.Printf("== %s: %d changes since %s, %d incompatible\n", m.Path, len(report.Changes), last, len(breaking))
		for _, msg := range breaking {
			fmt.Printf("  incompatible: %s\n", msg)
		}
		if len(breaking) > 0 && !allowed {
			fmt.Printf("  %s after %s may not break the API: name a new minor version (before v1) or major in CHANGELOG.md, or keep the old names\n", next, lastVersion)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// breakingAllowed reports whether release next may break the API of
// release last: a new major version, or before v1 a new minor one.
func breakingAllowed(last, next string) bool {
	if semver.Compare(next, last) <= 0 {
		return false
	}
	if semver.Major(next) != semver.Major(last) {
		return true
	}
	return semver.Major(next) == "v0" && semver.MajorMinor(next) != semver.MajorMinor(last)
}

// lastTag returns the newest release tag of the module whose tags begin
// with prefix ("" for the root, "redis/" for redis), or "" if none.
func lastTag(root, prefix string) string {
	out, err := git(root, "tag", "--list", prefix+"v*")
	if err != nil {
		log.Fatal(err)
	}
	var last string
	for _, tag := range strings.Fields(out) {
		v := strings.TrimPrefix(tag, prefix)
		if !semver.IsValid(v) || strings.Contains(v, "/") {
			continue
		}
		if last == "" || semver.Compare(v, strings.TrimPrefix(last, prefix)) > 0 {
			last = tag
		}
	}
	return last
}

// checkout extracts the repository at tag into a new directory.
func checkout(root, tag string) (string, error) {
	dir, err := os.MkdirTemp("", "apicheck-")
	if err != nil {
		return "", err
	}
	archive := exec.Command("git", "archive", "--format=tar", tag)
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", dir)
	untar.Stdin, err = archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stderr, archive.Stderr = os.Stderr, os.Stderr
	if err := archive.Start(); err != nil {
		return "", err
	}
	if err := untar.Run(); err != nil {
		return "", fmt.Errorf("extracting %s: %w", tag, err)
	}
	if err := archive.Wait(); err != nil {
		return "", fmt.Errorf("git archive %s: %w", tag, err)
	}
	return dir, nil
}

// load type-checks the module's packages in dir, but its internal ones,
// which no user imports.
func load(dir, path string) (*apidiff.Module, error) {
	cfg := &packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	m := &apidiff.Module{Path: path}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if p.Module == nil || p.Module.Path != path || strings.Contains(p.PkgPath+"/", "/internal/") || p.Name == "main" {
			continue
		}
		m.Packages = append(m.Packages, p.Types)
	}
	return m, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
