// Command tidy runs go mod tidy in every module of the repository's
// workspace. Go's tidy reads no go.work: it would fetch each module of
// the repository that another requires, at its release's version, from
// the network. tidy serves them instead from an on-disk proxy zipped
// from the working tree, then removes their lines from each go.sum,
// whose hashes would be the tree's, not the release's.
//
// Usage, from the repository's root: go run ./internal/release/cmd/tidy
// (make tidy).
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratewise/ratewise/internal/release"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("tidy: ")
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	dirs, err := release.Workspace(root)
	if err != nil {
		log.Fatal(err)
	}
	mods, err := release.Next(root, dirs)
	if err != nil {
		log.Fatal(err)
	}
	proxy, err := os.MkdirTemp("", "ratewise-proxy-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(proxy)
	if err := release.BuildProxy(proxy, mods, time.Now()); err != nil {
		log.Fatal(err)
	}
	// Third-party modules: the module cache first, then the network.
	cache, upstream := goEnv("GOMODCACHE"), goEnv("GOPROXY")
	prefix := mods[0].Path
	env := append(os.Environ(),
		"GOWORK=off",
		"GOPROXY="+release.GoProxy(proxy, cache, upstream),
		"GONOSUMDB="+prefix,
		// ours would be extracted into the module cache at a version
		// they are not yet: keep them out of the user's.
		"GOFLAGS=-modcacherw",
		"GOMODCACHE="+filepath.Join(proxy, "modcache"),
	)
	failed := false
	for _, m := range mods {
		fmt.Printf("== go mod tidy %s\n", m.Path)
		cmd := exec.Command("go", "mod", "tidy")
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = m.Dir, env, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			log.Printf("%s: %v", m.Path, err)
			failed = true
			continue
		}
		if err := dropSums(filepath.Join(m.Dir, "go.sum"), prefix); err != nil {
			log.Fatal(err)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// dropSums removes from the go.sum at name the lines of the modules under
// prefix: the workspace needs none, and a user's go.sum gets them from
// the release.
func dropSums(name, prefix string) error {
	data, err := os.ReadFile(name)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	s := bufio.NewScanner(bytes.NewReader(data))
	for s.Scan() {
		path, _, _ := strings.Cut(s.Text(), " ")
		if path == prefix || strings.HasPrefix(path, prefix+"/") {
			continue
		}
		kept.WriteString(s.Text() + "\n")
	}
	return os.WriteFile(name, kept.Bytes(), 0o644)
}

func goEnv(name string) string {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		log.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
