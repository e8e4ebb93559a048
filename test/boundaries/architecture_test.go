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
	rows := layoutRows(t)
	folders := goFolders(t)
	for _, f := range folders {
		if !slices.ContainsFunc(rows, func(r string) bool { return covers(r, f) }) {
			t.Errorf("docs/architecture.md's layout table has no row for %s/", f)
		}
	}
	for _, r := range rows {
		dir := strings.TrimSuffix(r, "/*")
		if st, err := os.Stat(filepath.Join(repoRoot, dir)); err != nil || !st.IsDir() {
			t.Errorf("docs/architecture.md's layout table names %s, which is no folder", r)
		}
	}
	t.Logf("%d folders with Go files, %d rows", len(folders), len(rows))
}

// covers reports whether a row of the layout table stands for folder.
func covers(row, folder string) bool {
	if parent, ok := strings.CutSuffix(row, "/*"); ok {
		return strings.HasPrefix(folder, parent+"/")
	}
	return row == folder
}

// layoutCell matches one folder named in the layout table's first column.
var layoutCell = regexp.MustCompile("`([^`]+)`")

// layoutRows returns the folders the layout table names ("| folder |
// what lives there |"), without a trailing slash.
func layoutRows(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| folder | what lives there |\n|---|---|\n")
	if !ok {
		t.Fatal("docs/architecture.md has no layout table (| folder | what lives there |)")
	}
	var rows []string
	for line := range strings.Lines(table) {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range layoutCell.FindAllStringSubmatch(first, -1) {
			rows = append(rows, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(rows) == 0 {
		t.Fatal("docs/architecture.md's layout table has no rows")
	}
	return rows
}

// goFolders returns the folders of the module that hold Go files,
// relative to the repository root: nested modules, hidden folders and
// testdata left out.
func goFolders(t *testing.T) []string {
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
		if strings.HasSuffix(rel, ".go") && filepath.Dir(rel) != "." {
			seen[filepath.ToSlash(filepath.Dir(rel))] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(seen))
}
