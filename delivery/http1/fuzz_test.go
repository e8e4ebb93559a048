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

package http1_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"knative.dev/event-forwarding-proxy/delivery/http1"
)

// FuzzAnswer: whatever bytes a destination answers with, then closing its
// side, the call ends in an answer or an error, never a panic or a wait
// for the deadline; an answer is a final one (1xx skipped) whose body reads
// to its end or fails; and a connection the destination closed is not kept.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: v\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"garbage",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		// A connected pair of sockets instead of TCP: tens of thousands of
		// runs would use up loopback's ports, and the transport still sees
		// a descriptor it can wait on without a buffer.
		client, server := socketPair(t)
		served := make(chan struct{})
		go func() {
			defer close(served)
			defer server.Close()
			if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
				return
			}
			_, _ = io.WriteString(server, answer)
			_ = server.CloseWrite()
			_, _ = io.Copy(io.Discard, server) // until the client closes
		}()
		dialed := false
		dial := func(context.Context, string, string) (net.Conn, error) {
			if dialed {
				return nil, errors.New("a second dial")
			}
			dialed = true
			return client, nil
		}
		tr := &http1.Transport{Dial: dial}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sink.example/", strings.NewReader("event"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err == nil {
			if resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("an interim answer %d came back as the final one", resp.StatusCode)
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the call waited for its deadline on %q: %v", answer, err)
		}
		// The destination closed its side: the connection may be kept only
		// until a call would look at it, never used for one.
		tr.CloseIdleConnections()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatalf("the connection to a destination that answered %q stayed open", answer)
		}
	})
}

// socketPair returns the two ends of a connected pair of Unix sockets.
func socketPair(t *testing.T) (client, server *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int, name string) *net.UnixConn {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	client, server = conn(fds[0], "client"), conn(fds[1], "server")
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}
