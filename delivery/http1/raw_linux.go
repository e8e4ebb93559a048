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

package http1

import (
	"io"
	"os"
	"syscall"
)

// readNonblocking reads what the socket fd holds without waiting:
// errWouldBlock when it holds nothing yet, io.EOF when the peer closed.
func readNonblocking(fd int, p []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errWouldBlock
		case err != nil:
			return 0, os.NewSyscallError("read", err)
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// alive reports whether an idle connection is still open and quiet: the
// destination has neither closed it nor sent anything unasked. It looks
// without reading (MSG_PEEK) and without waiting.
func (c *conn) alive() bool {
	if c.peekRaw == nil {
		return true
	}
	quiet := false
	err := c.peekRaw.Read(func(fd uintptr) bool {
		for {
			_, _, err := syscall.Recvfrom(int(fd), c.peek[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			quiet = err == syscall.EAGAIN
			return true
		}
	})
	return err == nil && quiet
}
