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
