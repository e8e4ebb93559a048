//go:build integration

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

package monitoring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// binDir holds the binaries, each built on first use by binary.
var (
	binDir string
	builds sync.Map // package path -> *build
)

// build is one binary, built once.
type build struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "monitoring-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proxyBinary returns the path of cmd/proxy, built once.
func proxyBinary(t *testing.T) string { return binary(t, "cmd/proxy") }

// mtpingBinary returns the path of cmd/mtping, built once.
func mtpingBinary(t *testing.T) string { return binary(t, "cmd/mtping") }

// binary builds the module's package pkg once, with the race detector
// (the flags `make test` builds everything with, so the build cache is
// shared), and returns its path.
func binary(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &build{path: filepath.Join(binDir, filepath.Base(pkg))})
	b := v.(*build)
	b.once.Do(func() {
		cmd := exec.Command("go", "build", "-race", "-o", b.path, "knative.dev/event-forwarding-proxy/"+pkg)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.err = fmt.Errorf("building %s: %w\n%s", pkg, err, out.String())
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// requireTool returns the path of a Prometheus binary, failing the test
// with what to run when it is missing. Never a skip: the Makefile installs
// it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: run `make test` (or `make prometheus-tools`), which installs Debian's prometheus package (prometheus and promtool)", name)
	}
	return path
}
