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

package report

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"knative.dev/event-forwarding-proxy/test/bench/result"
)

var update = flag.Bool("update", false, "rewrite docs/benchmarks.md's generated blocks from the committed artefacts")

// The document and the committed artefacts its generated blocks come
// from, relative to this package's folder. `make bench` writes them all.
var (
	docsDir        = filepath.Join("..", "..", "..", "docs")
	docFile        = filepath.Join(docsDir, "benchmarks.md")
	resultsFile    = filepath.Join(docsDir, "bench", "results.json")
	gobenchFile    = filepath.Join(docsDir, "bench", "gobench.txt")
	mtpingSeedFile = filepath.Join(docsDir, "bench", "mtping-seed.json")
)

const regenerate = "`make bench` writes the artefacts and the blocks; " +
	"`go test ./test/bench/report/ -run TestBenchmarksDocIsGenerated -update` rewrites the blocks from the committed artefacts"

// TestBenchmarksDocIsGenerated checks that every generated block of
// docs/benchmarks.md is what the committed artefacts generate: the blocks
// of `loadgen report` from docs/bench/results.json and
// docs/bench/gobench.txt, BenchmarkSeed's block from
// docs/bench/mtping-seed.json. The plots are not compared; the Markdown
// that shows them is, and the files it names must exist. With -update it
// rewrites the blocks.
func TestBenchmarksDocIsGenerated(t *testing.T) {
	res, err := result.Read(resultsFile)
	if err != nil {
		t.Fatal(err)
	}
	gobench, err := os.ReadFile(gobenchFile)
	if err != nil {
		t.Fatalf("%v (make bench writes it: `go test -bench ... | tee docs/bench/gobench.txt`)", err)
	}
	seed, err := ReadMtpingSeed(mtpingSeedFile)
	if err != nil {
		t.Fatal(err)
	}
	sections := Sections(Doc{Results: res, GoBench: string(gobench), PlotDir: "bench"})
	b, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if *update {
		doc = replaceBlock(Update(doc, sections), MtpingSeedBegin, MtpingSeedEnd, seed.Markdown())
		if err := os.WriteFile(docFile, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	type block struct{ name, begin, end, want, from string }
	var tests []block
	for _, name := range blocks {
		from := "docs/bench/results.json"
		switch name {
		case "gobench":
			from = "docs/bench/gobench.txt"
		case "plots":
			from = "the plot names of test/bench/report"
		}
		tests = append(tests, block{name, begin(name), end(name), sections[name], from})
	}
	tests = append(tests, block{"mtping-seed", MtpingSeedBegin, MtpingSeedEnd, seed.Markdown(), "docs/bench/mtping-seed.json"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if nb, ne := strings.Count(doc, tc.begin), strings.Count(doc, tc.end); nb > 1 || ne > 1 {
				t.Fatalf("docs/benchmarks.md has %q %d times and %q %d times, want once each: its writers take the first", tc.begin, nb, tc.end, ne)
			}
			got, ok := blockOf(doc, tc.begin, tc.end)
			if !ok {
				t.Fatalf("docs/benchmarks.md has no block between %q and %q; %s", tc.begin, tc.end, regenerate)
			}
			if diff := cmp.Diff(strings.Split("\n"+tc.want+"\n", "\n"), strings.Split(got, "\n")); diff != "" {
				t.Errorf("docs/benchmarks.md's block %s is not what %s generates; %s (-want +got):\n%s", tc.name, tc.from, regenerate, diff)
			}
		})
	}

	t.Run("no other generated block", func(t *testing.T) {
		for _, m := range regexp.MustCompile(`<!-- BEGIN generated:([^ ]+) -->`).FindAllStringSubmatch(doc, -1) {
			if _, ok := sections[m[1]]; !ok {
				t.Errorf("docs/benchmarks.md has a block %q that nothing generates", m[1])
			}
		}
	})
	t.Run("files the blocks name exist", func(t *testing.T) {
		for _, m := range regexp.MustCompile(`\]\((bench/[^)]+)\)`).FindAllStringSubmatch(doc, -1) {
			if _, err := os.Stat(filepath.Join(docsDir, m[1])); err != nil {
				t.Errorf("docs/benchmarks.md links %s: %v", m[1], err)
			}
		}
	})
}

// writtenFor is how a hand-written passage of docs/benchmarks.md that
// quotes the figures of docs/bench/results.json or docs/bench/gobench.txt
// names the run it was written for, across line breaks.
var writtenFor = regexp.MustCompile(`Written\s+for\s+the\s+run\s+of\s+(\d{4}-\d{2}-\d{2})\s+(\d{2}:\d{2})\s+UTC`)

// TestBenchmarksDocTextIsOfTheRun checks that the hand-written passages
// that quote the run's figures were written for the run of
// docs/bench/results.json: after `make bench` they fail until revised.
func TestBenchmarksDocTextIsOfTheRun(t *testing.T) {
	res, err := result.Read(resultsFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	run := res.Started.UTC().Format("2006-01-02 15:04 MST")
	ms := writtenFor.FindAllStringSubmatch(string(b), -1)
	if len(ms) == 0 {
		t.Fatalf("docs/benchmarks.md names no run its text was written for (%q)", writtenFor)
	}
	for _, m := range ms {
		if at := m[1] + " " + m[2] + " UTC"; at != run {
			t.Errorf("docs/benchmarks.md has text written for the run of %s, but docs/bench/results.json is of %s: "+
				"revise the passage's figures to the new run, then its date", at, run)
		}
	}
}

// blockOf returns what lies between the markers b and e of doc.
func blockOf(doc, b, e string) (string, bool) {
	i := strings.Index(doc, b)
	j := strings.Index(doc, e)
	if i < 0 || j < i+len(b) {
		return "", false
	}
	return doc[i+len(b) : j], true
}

// replaceBlock puts body between the markers b and e of doc, as
// BenchmarkSeed does; doc is unchanged when it lacks them.
func replaceBlock(doc, b, e, body string) string {
	i := strings.Index(doc, b)
	j := strings.Index(doc, e)
	if i < 0 || j < i+len(b) {
		return doc
	}
	return doc[:i+len(b)] + "\n" + body + "\n" + doc[j:]
}
