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

package sender

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// sinkChildEnv makes the test binary a slow sink instead of running tests
// (see TestMain), so that a benchmark measures the adapter's process
// without the sink's goroutines and buffers in it.
const sinkChildEnv = "SENDER_TEST_SINK_CHILD"

// runSinkChild serves, on a loopback port it prints as a URL on stdout, a
// sink that holds every POST for the duration in its "hold" query
// parameter, and answers GET /held with the number of calls it holds and
// the number it received since it started, separated by a space. The
// value of sinkChildEnv is "h1" for HTTP/1.1 only, anything else for
// HTTP/1.1 and h2c. It exits when its stdin closes.
func runSinkChild() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var held, received atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /held", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, strconv.FormatInt(held.Load(), 10)+" "+strconv.FormatInt(received.Load(), 10))
	})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hold, _ := time.ParseDuration(r.URL.Query().Get("hold"))
		received.Add(1)
		held.Add(1)
		defer held.Add(-1)
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols),
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 100000}}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(os.Getenv(sinkChildEnv) != "h1")
	go func() { _ = srv.Serve(ln) }()
	fmt.Println("http://" + ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// childSink is a sink running in a child process.
type childSink struct {
	URL string
}

// startChildSink runs this test binary as a sink (h2c unless h1Only) and
// stops it at cleanup.
func startChildSink(tb testing.TB, h1Only bool) *childSink {
	tb.Helper()
	mode := "h2c"
	if h1Only {
		mode = "h1"
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), sinkChildEnv+"="+mode)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("the sink child did not start: %v", err)
	}
	return &childSink{URL: strings.TrimSpace(line)}
}

// state returns the number of calls the sink holds now and the number it
// received since it started.
func (c *childSink) state(tb testing.TB) (held, received int) {
	tb.Helper()
	resp, err := http.Get(c.URL + "/held")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	h, r, _ := strings.Cut(string(b), " ")
	held, err1 := strconv.Atoi(h)
	received, err2 := strconv.Atoi(r)
	if err1 != nil || err2 != nil {
		tb.Fatalf("held: %q", b)
	}
	return held, received
}
