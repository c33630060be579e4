package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// repoRoot is the repository's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func releaseModules(t *testing.T) []Module {
	t.Helper()
	mods, err := Next(repoRoot(t), Published)
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// TestPublishedGoModsResolve checks the published go.mod files as a
// user's go command reads them: no replace, no exclude, and every module
// of the repository they require published at the release's version.
func TestPublishedGoModsResolve(t *testing.T) {
	if err := CheckRequirements(releaseModules(t)); err != nil {
		t.Errorf("the published go.mod files do not resolve outside the repository:\n%v", err)
	}
}

// userProgram uses a package of each published library module, as a
// user's service would.
const userProgram = `package main

import (
	"fmt"
	"net/http"

	prom "github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/ratewise/ratewise"
	rwotel "github.com/ratewise/ratewise/otel"
	rwprom "github.com/ratewise/ratewise/prometheus"
	rwredis "github.com/ratewise/ratewise/redis"
)

func main() {
	store := rwredis.New(goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"}), rwredis.Options{})
	tr := ratewise.New(http.DefaultTransport, ratewise.WithStore(store))
	prom.NewRegistry().MustRegister(rwprom.NewCollector(tr))
	client := &http.Client{Transport: rwotel.New(tr, rwotel.Config{})}
	fmt.Println(client.Transport != nil)
}
`

// TestUserModuleResolvesFromAProxy is a user's first five minutes, run
// from outside the repository: an on-disk module proxy serves the
// published modules zipped from this tree at the release's version; a fresh
// module requires the root, redis, otel and prometheus, runs go mod
// tidy, builds a program that uses each, and go installs the MCP server
// at its version. A placeholder version, a test-only module or a replace
// in a published go.mod fails it, as it would fail the user.
func TestUserModuleResolvesFromAProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module proxy and a fresh module: not in -short")
	}
	mods := releaseModules(t)
	work := t.TempDir()
	proxy := filepath.Join(work, "proxy")
	if err := BuildProxy(proxy, mods, time.Now()); err != nil {
		t.Fatal(err)
	}

	// Ours come from that proxy only: no other serves them. A third-party
	// module comes from this machine's module cache, as a second on-disk
	// proxy, and from the network's proxy only when the cache lacks it,
	// as a user's go command would fetch it.
	cache := strings.TrimSpace(goCmd(t, repoRoot(t), os.Environ(), "env", "GOMODCACHE"))
	upstream := strings.TrimSpace(goCmd(t, repoRoot(t), os.Environ(), "env", "GOPROXY"))
	env := append(os.Environ(),
		"GOPROXY="+GoProxy(proxy, cache, upstream),
		"GOWORK=off",
		"GOSUMDB=off",
		"GOTOOLCHAIN=local",
		"GOFLAGS=-modcacherw",
		// The go command indexes a module of the module cache once, as
		// immutable; ours change at one version from run to run.
		"GODEBUG=goindex=0",
		"GOMODCACHE="+userModCache(t, mods),
		"GOBIN="+filepath.Join(work, "bin"),
		"GOPATH="+filepath.Join(work, "gopath"),
	)

	user := filepath.Join(work, "user")
	if err := os.MkdirAll(user, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(user, "go.mod"), "module example.com/user\n\ngo 1.26.0\n")
	writeFile(t, filepath.Join(user, "main.go"), userProgram)
	get := []string{"get"}
	for _, m := range mods {
		if m.Path != mods[len(mods)-1].Path { // the commands' module is installed, not required
			get = append(get, m.Path+"@"+m.Version)
		}
	}
	goCmd(t, user, env, get...)
	goCmd(t, user, env, "mod", "tidy")
	goCmd(t, user, env, "build", "-o", filepath.Join(work, "user-program"), ".")

	examples := mods[len(mods)-1]
	goCmd(t, work, env, "install", examples.Path+"/kanbanize-mcp@"+examples.Version)
	if _, err := os.Stat(filepath.Join(work, "bin", "kanbanize-mcp")); err != nil {
		t.Errorf("go install left no kanbanize-mcp in GOBIN: %v", err)
	}
}

// userModCache returns the user module's module cache, kept between runs
// so that the third-party packages it builds stay in the build cache,
// with ours removed: they are extracted afresh from this tree's proxy.
func userModCache(t *testing.T, mods []Module) string {
	t.Helper()
	dir, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no user cache directory for the user module's module cache: %v", err)
	}
	cache := filepath.Join(dir, "ratewise-release-test", "modcache")
	// The root module is extracted beside the directory of the nested
	// ones (…/ratewise@v0.1.0 and …/ratewise/redis@v0.1.0): both go.
	ours := filepath.FromSlash(mods[0].Path)
	extracted, err := filepath.Glob(filepath.Join(cache, ours) + "@*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range append(extracted, filepath.Join(cache, ours), filepath.Join(cache, "cache", "download", ours)) {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	return cache
}

func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), filepath.Base(dir), err, out.String())
	}
	return out.String()
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
