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

// Package reliability puts the proxy through faults that need a whole
// process or a whole pod's worth of traffic: shutdown with calls held,
// and the accounting soak, where every event of a few thousand, through
// every fault at once, must be accounted for exactly once. The proxy runs
// as the real binary (built once, with the race detector) or in process
// through its exported API, with goleak watching the in-process one.
//
// Every test here carries the integration build tag: `make integration`
// runs them, or `go test -tags integration ./test/reliability/`.
package reliability

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/test/testproc"

	"go.uber.org/goleak"

	"knative.dev/event-forwarding-proxy/proxy/proxytest"
)

// Shared with the other process tests (test/testproc).
var (
	freePort = testproc.FreePort
)

// proxyBin is the proxy binary built by TestMain.
var proxyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "reliability-proxy")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	proxyBin = filepath.Join(dir, "proxy")
	// The same flags as test/e2e, so that the build cache serves both.
	if err := testproc.GoBuild(proxyBin, "cmd/proxy", true); err != nil {
		fmt.Fprintln(os.Stderr, "building the proxy:", err)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(proxytest.IgnoreToxiproxy()...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running proxy process.
type proc struct{ *testproc.Proc }

// startProxy runs the proxy binary with loopback destinations allowed,
// debug logs and env added, and waits until it answers /healthz.
func startProxy(t *testing.T, env ...string) *proc {
	t.Helper()
	return &proc{testproc.StartProxy(t, proxyBin, freePort(t), freePort(t), append([]string{"FORWARD_LOG_LEVEL=debug"}, env...)...)}
}

// get returns the status of a GET of url, 0 if it fails.
func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// post sends body to the proxy at url, for dest, with headers (name, value
// pairs), in the background.
func post(url, dest, body string, headers ...string) <-chan answer {
	ch := make(chan answer, 1)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		ch <- answer{err: err}
		return ch
	}
	req.Header.Set("Kn-Forward-To", dest)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{status: resp.StatusCode, reason: resp.Header.Get("Kn-Forward-Error"), body: string(b), err: err}
	}()
	return ch
}

// answer is what a caller got.
type answer struct {
	status int
	reason string // Kn-Forward-Error
	body   string
	err    error // no answer, or a broken one
}

// awaitAnswer returns the answer, failing after 30 s.
func awaitAnswer(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(30 * time.Second):
		t.Fatal("no answer within 30s")
		return answer{}
	}
}
