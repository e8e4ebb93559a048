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

package apiserver

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// module is the main module's path; its root holds .cache/bin.
const module = "knative.dev/event-forwarding-proxy"

// toolsEnv names a folder holding kube-apiserver, etcd and kubectl,
// instead of the repository's .cache/bin.
const toolsEnv = "TEST_TOOLS_BIN"

type toolBinaries struct {
	apiserver, etcd, kubectl string
}

// binaries finds kube-apiserver, etcd and kubectl, or says how to build
// them.
func binaries() (toolBinaries, error) {
	dir := os.Getenv(toolsEnv)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return toolBinaries{}, err
		}
		dir = filepath.Join(root, ".cache", "bin")
	}
	b := toolBinaries{apiserver: filepath.Join(dir, "kube-apiserver"), etcd: filepath.Join(dir, "etcd"), kubectl: filepath.Join(dir, "kubectl")}
	for _, f := range []string{b.apiserver, b.etcd, b.kubectl} {
		if st, err := os.Stat(f); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return toolBinaries{}, fmt.Errorf("%s is missing or not executable: run `make tools` at the repository root "+
				"(it builds kube-apiserver, etcd and kubectl into .cache/bin; `make test` does it first), or set %s", f, toolsEnv)
		}
	}
	return b, nil
}

// moduleRoot walks up from the working directory (a test's package
// directory) to the main module's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside module " + module + ": cannot find .cache/bin")
		}
		dir = parent
	}
}

// modulePath returns the module path declared in a go.mod file, or "".
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
