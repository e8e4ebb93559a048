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

package load

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"knative.dev/event-forwarding-proxy/test/testproc"
)

// envHelper makes the test binary act as the load generator's helper
// commands (sink, naive, sender), as cmd/loadgen does in a real run.
const envHelper = "LOADGEN_TEST_HELPER"

// proxyBin is the cmd/proxy binary the smoke test drives.
var proxyBin string

func TestMain(m *testing.M) {
	if os.Getenv(envHelper) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "loadgen-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	if err := testproc.GoBuild(proxyBin, "cmd/proxy", false); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
