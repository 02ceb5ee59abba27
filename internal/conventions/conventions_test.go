package conventions

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/mrep-dev/mrep/"

// root is the repository, two levels up from this package.
var root = filepath.Join("..", "..")

// packages maps each Go package directory (slash-separated, relative to the root) to the
// imports of its non-test files.
func packages(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "exporter" || name == "bin" || name == "out") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		dir := filepath.ToSlash(rel)
		if _, ok := out[dir]; !ok {
			out[dir] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			out[dir] = append(out[dir], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The import rules: counting never imports timing, timing never imports layouts, render/chart
// imports no mrep package but internal/units, and the pure packages do no I/O (no os, no
// database, no network, no processes).
func TestImportRules(t *testing.T) {
	pkgs := packages(t)
	forbid := map[string][]string{
		"analyzer":     {module + "timing", module + "layout", module + "serve", module + "calib", module + "store", module + "render"},
		"kernels":      {module + "timing", module + "layout", module + "analyzer"},
		"timing":       {module + "layout", module + "serve", module + "calib", module + "store", module + "render"},
		"layout":       {module + "serve", module + "calib", module + "store", module + "render"},
		"serve":        {module + "calib", module + "store", module + "render"},
		"calib":        {module + "store", module + "render"},
		"report":       {module + "render", module + "store"},
		"render/chart": {},
	}
	io := []string{"os", "io/ioutil", "database/sql", "net", "net/http", "os/exec", "syscall"}
	for _, p := range []string{"analyzer", "kernels", "timing", "layout", "serve", "econ", "calib", "report", "render", "render/chart"} {
		forbid[p] = append(forbid[p], io...)
	}
	for pkg, bad := range forbid {
		imps, ok := pkgs[pkg]
		if !ok {
			t.Errorf("package %s is gone: update the rules here and in ARCHITECTURE.md", pkg)
			continue
		}
		for _, imp := range imps {
			for _, b := range bad {
				if imp == b {
					t.Errorf("%s imports %s (ARCHITECTURE.md: %s may not)", pkg, imp, pkg)
				}
			}
			if pkg == "render/chart" && strings.HasPrefix(imp, module) && imp != module+"internal/units" {
				t.Errorf("render/chart imports %s: it imports no mrep package but internal/units", imp)
			}
		}
	}
}

// The README's package table names every Go package (a command under a package's cmd/ counts
// with its package), and the README's Go version is go.mod's.
func TestREADMEMatchesTheCode(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if want := "Go " + string(m[1]) + "+"; !strings.Contains(string(readme), want) {
		t.Errorf("the README does not say %q, go.mod's version", want)
	}
	var table []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `") {
			table = append(table, line)
		}
	}
	listed := map[string]bool{}
	for _, line := range table {
		for _, c := range regexp.MustCompile("`([a-z0-9_/.-]+)`").FindAllStringSubmatch(line, -1) {
			listed[strings.TrimSuffix(c[1], "/")] = true
		}
	}
	var missing []string
	for pkg := range packages(t) {
		if pkg == "." || listed[pkg] || listed[strings.TrimSuffix(pkg, "/cmd")] {
			continue
		}
		missing = append(missing, pkg)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the README's package table does not list %s", strings.Join(missing, ", "))
	}
}
