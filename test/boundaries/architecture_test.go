/*
Copyright 2026 The Knative Authors

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package boundaries

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// repoRoot is the repository root, seen from this package's directory.
const repoRoot = "../.."

// TestArchitectureNamesEveryFolder keeps docs/architecture.md's layout
// table true: every folder of the module that holds Go files has a row
// (a row `x/*` stands for every folder below x), and every folder a row
// names exists.
func TestArchitectureNamesEveryFolder(t *testing.T) {
	rows := layoutTable(t)
	folders := goFolders(t, ".go")
	for _, f := range folders {
		if !slices.ContainsFunc(rows, func(r layoutRow) bool { return r.covers(f) }) {
			t.Errorf("docs/architecture.md's layout table has no row for %s/", f)
		}
	}
	for _, r := range rows {
		for _, name := range r.folders {
			if !isFolder(strings.TrimSuffix(name, "/*")) {
				t.Errorf("docs/architecture.md's layout table names %s, which is no folder", name)
			}
		}
	}
	t.Logf("%d folders with Go files, %d rows", len(folders), len(rows))
}

// TestArchitectureSaysWhereTestsLive keeps the table's tests column true:
// each folder it names holds tests, and each folder that holds tests is
// named in its own row, so a reader who looks up a package finds its
// tests there and, after them, the suites that run it as a process.
func TestArchitectureSaysWhereTestsLive(t *testing.T) {
	rows := layoutTable(t)
	tested := goFolders(t, "_test.go")
	for _, r := range rows {
		if r.tests == "" {
			t.Errorf("docs/architecture.md's row for %s says nothing of its tests", strings.Join(r.folders, ", "))
		}
		for _, m := range layoutCell.FindAllStringSubmatch(r.tests, -1) {
			name := strings.TrimSuffix(m[1], "/")
			if strings.HasPrefix(name, "make ") {
				continue // a target that runs tests
			}
			if !slices.ContainsFunc(tested, func(f string) bool { return covers(name, f) }) {
				t.Errorf("docs/architecture.md's tests column names %s, which holds no tests", name)
			}
		}
	}
	for _, f := range tested {
		i := slices.IndexFunc(rows, func(r layoutRow) bool { return r.covers(f) })
		if i < 0 {
			continue // TestArchitectureNamesEveryFolder says so
		}
		if !slices.ContainsFunc(layoutCell.FindAllStringSubmatch(rows[i].tests, -1), func(m []string) bool {
			return covers(strings.TrimSuffix(m[1], "/"), f)
		}) {
			t.Errorf("docs/architecture.md's tests column does not name %s/ in its own row, which holds tests", f)
		}
	}
}

// covers reports whether a row of the layout table stands for folder.
func covers(row, folder string) bool {
	if parent, ok := strings.CutSuffix(row, "/*"); ok {
		return strings.HasPrefix(folder, parent+"/")
	}
	return row == folder
}

// isFolder reports whether dir, relative to the repository root, is a
// folder.
func isFolder(dir string) bool {
	st, err := os.Stat(filepath.Join(repoRoot, dir))
	return err == nil && st.IsDir()
}

// layoutCell matches one folder named in a cell of the layout table.
var layoutCell = regexp.MustCompile("`([^`]+)`")

// layoutRow is one row of the layout table: the folders of its first
// column, without a trailing slash, and its tests column as written.
type layoutRow struct {
	folders []string
	tests   string
}

func (r layoutRow) covers(folder string) bool {
	return slices.ContainsFunc(r.folders, func(name string) bool { return covers(name, folder) })
}

// layoutHeader opens the layout table.
const layoutHeader = "| folder | what lives there | tests |\n|---|---|---|\n"

// layoutTable returns the rows of docs/architecture.md's layout table.
func layoutTable(t *testing.T) []layoutRow {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), layoutHeader)
	if !ok {
		t.Fatalf("docs/architecture.md has no layout table (%s)", strings.SplitN(layoutHeader, "\n", 2)[0])
	}
	var rows []layoutRow
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cells := strings.Split(strings.TrimSuffix(strings.TrimSpace(line), "|"), " | ")
		var r layoutRow
		for _, m := range layoutCell.FindAllStringSubmatch(strings.TrimPrefix(cells[0], "| "), -1) {
			r.folders = append(r.folders, strings.TrimSuffix(m[1], "/"))
		}
		if len(cells) >= 3 {
			r.tests = strings.TrimSpace(cells[len(cells)-1])
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md's layout table has no rows")
	}
	return rows
}

// goFolders returns the folders of the module that hold files whose name
// ends in suffix, relative to the repository root: nested modules, hidden
// folders and testdata left out.
func goFolders(t *testing.T, suffix string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, suffix) && filepath.Dir(rel) != "." {
			seen[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(seen))
}
