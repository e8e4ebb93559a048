//go:build h2spec

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

package h2server_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// h2specAllowed are the h2spec cases the server fails on purpose, each
// with its reason.
var h2specAllowed = map[string]string{
	// The port serves HTTP/1.1 too, as Go's own server does: a preface
	// that is not HTTP/2's is an HTTP/1.1 request, answered 400.
	"3.5/2": "the port is shared with HTTP/1.1",
}

// TestH2Spec runs h2spec (built by make from its pinned module into
// .cache/bin, or H2SPEC) against the server with a handler that reads
// the whole request, as the proxy's does before it answers: every case
// passes but those in h2specAllowed, and none is skipped.
func TestH2Spec(t *testing.T) {
	bin := os.Getenv("H2SPEC")
	if bin == "" {
		_, file, _, _ := runtime.Caller(0)
		bin = filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "bin", "h2spec")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("h2spec is missing (make h2spec builds it): %v", err)
	}
	f := startServer(t, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// More than the initial window: the flow-control cases need an
		// answer that waits for it (h2spec skips 6.9.2/2 otherwise).
		_, _ = w.Write(bytes.Repeat([]byte("h2spec "), 20000))
	}))
	host, port, _ := net.SplitHostPort(f.addr)
	// -o: how long h2spec waits for each frame it expects, 5 s rather
	// than its default 2, so that a run under -race on a machine busy
	// with other tests fails no case for a slow answer. A passing run
	// waits for none: a case that expects nothing ends at the close or
	// reset it expects.
	out, err := exec.Command(bin, "-h", host, "-p", port, "-o", "5", "-j", filepath.Join(t.TempDir(), "report.xml")).CombinedOutput()
	var total, passed, skipped, nfailed int
	summary := out[bytes.LastIndex(bytes.TrimRight(out, "\n"), []byte("\n"))+1:]
	if _, serr := fmt.Sscanf(string(summary), "%d tests, %d passed, %d skipped, %d failed", &total, &passed, &skipped, &nfailed); serr != nil || total < 145 {
		t.Fatalf("h2spec ran no full suite (%v, %v):\n%s", err, serr, out)
	}
	t.Logf("h2spec: %s", bytes.TrimSpace(summary))
	if skipped != 0 {
		t.Errorf("h2spec skipped %d cases:\n%s", skipped, out)
	}
	failed := failedCases(string(out))
	if len(failed) != nfailed {
		t.Fatalf("read %d failed cases from the report, its summary says %d:\n%s", len(failed), nfailed, out)
	}
	for id := range h2specAllowed {
		delete(failed, id)
	}
	if len(failed) > 0 {
		t.Errorf("h2spec cases failed: %v\n%s", failed, out)
	}
}

// failedCases are the ids ("5.1/8") of the cases h2spec's report marks
// with ×, from its section numbers and case numbers.
func failedCases(report string) map[string]bool {
	failed := map[string]bool{}
	section := ""
	for _, line := range strings.Split(report, "\n") {
		s := strings.TrimSpace(line)
		if i := strings.Index(s, ". "); i > 0 && isSection(s[:i]) {
			section = s[:i]
			continue
		}
		if rest, ok := strings.CutPrefix(s, "× "); ok {
			if n, _, ok := strings.Cut(rest, ":"); ok {
				failed[section+"/"+n] = true
			}
		}
	}
	return failed
}

func isSection(s string) bool {
	for _, r := range s {
		if (r < '0' || r > '9') && r != '.' {
			return false
		}
	}
	return s != ""
}
