//go:build !linux

package http1

import "errors"

// readNonblocking is not used where rawConn gives no descriptor access.
func readNonblocking(int, []byte) (int, error) {
	return 0, errors.New("http1: non-blocking reads need linux")
}

// alive cannot look at an idle connection here without reading it: it is
// taken as open, and a closed one fails the call that finds it.
func (c *conn) alive() bool { return true }
