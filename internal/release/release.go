// Package release knows the repository's published modules and their
// release: which directories are modules a user requires, the version
// the next release gives them (the newest in CHANGELOG.md), and how to
// serve them from an on-disk module proxy, zipped from the working tree,
// as a user's go command would fetch them once tagged.
//
// It is not published: its tests prove, from a module outside the
// repository, that the published modules resolve with no replace.
package release

import (
	"bufio"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// Published lists the directories, relative to the repository's root, of
// the modules a user requires or installs, each tagged at a release as
// its directory's prefix and the version ("v0.1.0", "redis/v0.1.0").
var Published = []string{".", "redis", "otel", "prometheus", "examples"}

// Module is a published module of the repository.
type Module struct {
	Path string // the module path, from its go.mod
	Dir  string // its directory, absolute
	// Tag is the git tag that releases it at Version.
	Tag     string
	Version string
	GoMod   *modfile.File
}

// versionHeading matches a CHANGELOG.md heading that names a release,
// "## v0.1.0 (2026-11-27)" or "## [v0.1.0] - 2026-11-27".
var versionHeading = regexp.MustCompile(`^##\s+\[?(v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\]?`)

// ReleaseVersion returns the newest version CHANGELOG.md at root names,
// the version every published module has at this tree.
func ReleaseVersion(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m := versionHeading.FindStringSubmatch(s.Text()); m != nil {
			if !semver.IsValid(m[1]) {
				return "", fmt.Errorf("CHANGELOG.md: %q is not a semantic version", m[1])
			}
			return m[1], nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New("CHANGELOG.md names no release (a heading such as \"## v0.1.0 (2026-11-27)\")")
}

// Modules reads the modules of the repository at root in dirs (relative
// to root, such as Published), each at version.
func Modules(root, version string, dirs []string) ([]Module, error) {
	var mods []Module
	for _, rel := range dirs {
		dir := filepath.Join(root, rel)
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(filepath.Join(rel, "go.mod"), data, nil)
		if err != nil {
			return nil, err
		}
		tag := version
		if rel != "." {
			tag = rel + "/" + version
		}
		mods = append(mods, Module{Path: f.Module.Mod.Path, Dir: dir, Tag: tag, Version: version, GoMod: f})
	}
	return mods, nil
}

// CheckRequirements reports what in the published go.mod files a user's
// build could not resolve: a replace or exclude (ignored outside the
// module, and refused by go install), and a requirement on a module of
// the repository that is not published or not at the release's version
// (a placeholder such as v0.0.0-00010101000000-000000000000, or a
// test-only module).
func CheckRequirements(mods []Module) error {
	published := map[string]string{}
	for _, m := range mods {
		published[m.Path] = m.Version
	}
	prefix := mods[0].Path // the root module comes first in Published
	var errs []error
	for _, m := range mods {
		name := m.GoMod.Syntax.Name
		for _, r := range m.GoMod.Replace {
			errs = append(errs, fmt.Errorf("%s: replace %s: a user's build ignores it and go install refuses it; use go.work", name, r.Old.Path))
		}
		for _, x := range m.GoMod.Exclude {
			errs = append(errs, fmt.Errorf("%s: exclude %s: go install refuses it", name, x.Mod.Path))
		}
		for _, r := range m.GoMod.Require {
			if r.Mod.Path != prefix && !strings.HasPrefix(r.Mod.Path, prefix+"/") {
				continue
			}
			want, ok := published[r.Mod.Path]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("%s: requires %s, which is not a published module", name, r.Mod.Path))
			case r.Mod.Version != want:
				errs = append(errs, fmt.Errorf("%s: requires %s %s, not the release's %s", name, r.Mod.Path, r.Mod.Version, want))
			}
		}
	}
	return errors.Join(errs...)
}

// Next reads the modules of the repository at root in dirs (relative to
// root, such as Published), each at the version the next release gives
// them: the newest CHANGELOG.md names.
func Next(root string, dirs []string) ([]Module, error) {
	version, err := ReleaseVersion(root)
	if err != nil {
		return nil, err
	}
	return Modules(root, version, dirs)
}

// GoProxy is a GOPROXY that serves the modules of an on-disk proxy built
// by BuildProxy at dir, then those of the module cache at modcache (its
// cache/download, laid out as a proxy), then upstream's.
func GoProxy(dir, modcache, upstream string) string {
	return fileURL(dir) + "," + fileURL(filepath.Join(modcache, "cache", "download")) + "," + upstream
}

func fileURL(dir string) string {
	return (&url.URL{Scheme: "file", Path: filepath.ToSlash(dir)}).String()
}

// Workspace lists the directories, relative to root, of every module
// go.work uses, published or not, in its order.
func Workspace(root string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	f, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, u := range f.Use {
		dirs = append(dirs, filepath.Clean(u.Path))
	}
	return dirs, nil
}

// BuildProxy writes an on-disk module proxy at dir (GOPROXY=file://dir)
// that serves each module zipped from its directory in the working tree
// at its version: the files a tag at this tree would publish.
func BuildProxy(dir string, mods []Module, at time.Time) error {
	for _, m := range mods {
		escaped, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		vdir := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return err
		}
		base := filepath.Join(vdir, m.Version)
		info := fmt.Sprintf(`{"Version":%q,"Time":%q}`+"\n", m.Version, at.UTC().Format(time.RFC3339))
		if err := os.WriteFile(base+".info", []byte(info), 0o644); err != nil {
			return err
		}
		gomod, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
			return err
		}
		if err := writeZip(base+".zip", m); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(vdir, "list"), []byte(m.Version+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeZip(name string, m Module) (err error) {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := zip.CreateFromDir(f, module.Version{Path: m.Path, Version: m.Version}, m.Dir); err != nil {
		return fmt.Errorf("zipping %s@%s: %w", m.Path, m.Version, err)
	}
	return nil
}
